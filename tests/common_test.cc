// Tests for hyperpack::common: number and duration text, did-you-mean, expressions, the JSON form
// of a configuration and the search space's activity and validation rules.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hyperpack/config_json.h"
#include "hyperpack/expression.h"
#include "hyperpack/space.h"
#include "hyperpack/text.h"
#include "hyperpack/warm.h"

namespace hyperpack {
namespace {

using ::testing::HasSubstr;

// ---- FormatDouble / ParseDouble / ParseInt ------------------------------------------------------

TEST(FormatDoubleTest, ReadsBackToTheSameDoubleForChosenValues) {
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      1e-5,
                                      0.1,
                                      3.0,
                                      1e300,
                                      -1e300,
                                      1e-300,
                                      0.3,
                                      2.5e-7,
                                      123456789.0,
                                      1.0 / 3.0,
                                      -2.75,
                                      6.02e23,
                                      4.9e-324,
                                      std::numeric_limits<double>::max(),
                                      std::numeric_limits<double>::min()};
  for (double x : values) {
    std::string text = FormatDouble(x);
    auto back = ParseDouble(text);
    ASSERT_TRUE(back.has_value()) << text;
    EXPECT_EQ(*back, x) << text;
    EXPECT_EQ(std::signbit(*back), std::signbit(x)) << text;
  }
}

TEST(FormatDoubleTest, ReadsBackToTheSameDoubleForRandomBitPatterns) {
  std::mt19937_64 rng(12345);
  int checked = 0;
  while (checked < 5000) {
    uint64_t bits = rng();
    double x;
    static_assert(sizeof(x) == sizeof(bits));
    std::memcpy(&x, &bits, sizeof(x));
    if (!std::isfinite(x)) continue;
    std::string text = FormatDouble(x);
    auto back = ParseDouble(text);
    ASSERT_TRUE(back.has_value()) << text;
    ASSERT_EQ(*back, x) << text;
    ++checked;
  }
}

TEST(FormatDoubleTest, UsesTheShortestText) {
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(3.0), "3");
  EXPECT_EQ(FormatDouble(1e-5), "1e-05");
}

TEST(ParseDoubleTest, AcceptsWholeNumbersWithSignsAndExponents) {
  EXPECT_EQ(ParseDouble("2.5"), 2.5);
  EXPECT_EQ(ParseDouble("-2.5"), -2.5);
  EXPECT_EQ(ParseDouble("+2.5"), 2.5);
  EXPECT_EQ(ParseDouble("1e-3"), 1e-3);
  EXPECT_EQ(ParseDouble("7"), 7.0);
}

TEST(ParseDoubleTest, RejectsEmptyTextAndTrailingCharacters) {
  EXPECT_FALSE(ParseDouble("").has_value());
  EXPECT_FALSE(ParseDouble("+").has_value());
  EXPECT_FALSE(ParseDouble("1.5x").has_value());
  EXPECT_FALSE(ParseDouble("1.5 ").has_value());
  EXPECT_FALSE(ParseDouble(" 1.5").has_value());
  EXPECT_FALSE(ParseDouble("abc").has_value());
  EXPECT_FALSE(ParseDouble("1e").has_value());
}

TEST(ParseIntTest, AcceptsWholeIntegers) {
  EXPECT_EQ(ParseInt("42"), 42);
  EXPECT_EQ(ParseInt("-7"), -7);
  EXPECT_EQ(ParseInt("+7"), 7);
  EXPECT_EQ(ParseInt("9223372036854775807"), std::numeric_limits<int64_t>::max());
}

TEST(ParseIntTest, RejectsEmptyTextFractionsAndTrailingCharacters) {
  EXPECT_FALSE(ParseInt("").has_value());
  EXPECT_FALSE(ParseInt("12abc").has_value());
  EXPECT_FALSE(ParseInt("1.5").has_value());
  EXPECT_FALSE(ParseInt("1e3").has_value());
  EXPECT_FALSE(ParseInt("3 ").has_value());
  EXPECT_FALSE(ParseInt("9223372036854775808").has_value());  // out of range
}

// ---- ParseDuration ----------------------------------------------------------------------------

TEST(ParseDurationTest, ReadsUnitsAndTheirCombinations) {
  struct Case {
    const char* text;
    double seconds;
  };
  const Case cases[] = {
      {"90m", 90 * 60.0},        {"1h30m", 3600.0 + 30 * 60.0}, {"45s", 45.0}, {"2h", 2 * 3600.0},
      {"1.5h", 1.5 * 3600.0},    {"1d", 24 * 3600.0},           {"10", 10.0},  {"2.5", 2.5},
      {"1h0m30s", 3600.0 + 30.0}};
  for (const Case& c : cases) {
    auto d = ParseDuration(c.text);
    ASSERT_TRUE(d.ok()) << c.text << ": " << d.status().message();
    EXPECT_DOUBLE_EQ(*d, c.seconds) << c.text;
  }
}

TEST(ParseDurationTest, RejectsMalformedZeroAndNegativeDurations) {
  for (const char* text : {"", "10x", "m", "-5", "0", "0s", "1h30", "h1", "1.5.2h", "ten"}) {
    auto d = ParseDuration(text);
    EXPECT_FALSE(d.ok()) << "'" << text << "' was accepted as " << (d.ok() ? *d : 0.0);
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(d.status().message(), HasSubstr("is not a duration")) << text;
    }
  }
}

TEST(FormatDurationTest, WritesHoursMinutesAndSeconds) {
  EXPECT_EQ(FormatDuration(4000), "1h06m40s");
  EXPECT_EQ(FormatDuration(75), "1m15s");
  EXPECT_EQ(FormatDuration(3.2), "3.2s");
}

// ---- EditDistance / DidYouMean ------------------------------------------------------------------

TEST(EditDistanceTest, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", "abc"), 0u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("flaw", "lawn"), 2u);
  EXPECT_EQ(EditDistance("hihg", "high"), 2u);
}

TEST(EditDistanceTest, IsSymmetric) {
  const std::vector<std::string> words = {"",         "a",        "search_space", "serch_space",
                                          "minimize", "maximise", "trial"};
  for (const std::string& a : words)
    for (const std::string& b : words)
      EXPECT_EQ(EditDistance(a, b), EditDistance(b, a)) << a << "/" << b;
}

TEST(DidYouMeanTest, FindsTheClosestCandidateForATypo) {
  const std::vector<std::string> keys = {"type", "low", "high", "log", "when"};
  EXPECT_EQ(DidYouMean("hihg", keys), "high");
  EXPECT_EQ(DidYouMean("tpye", keys), "type");
  EXPECT_EQ(DidYouMean("whn", keys), "when");
  EXPECT_EQ(DidYouMean("serch_space", {"name", "objective", "search_space", "trial"}),
            "search_space");
  EXPECT_EQ(DidYouMean("maximise", {"minimize", "maximize"}), "maximize");
}

TEST(DidYouMeanTest, SuggestsNothingForUnrelatedWords) {
  const std::vector<std::string> keys = {"type", "low", "high", "log", "when"};
  EXPECT_FALSE(DidYouMean("optimizer", keys).has_value());
  EXPECT_FALSE(DidYouMean("zzzz", keys).has_value());
  EXPECT_FALSE(DidYouMean("x", {"y"}).has_value());  // one letter changed is the whole word
  EXPECT_FALSE(DidYouMean("anything", {}).has_value());
}

// ---- IsToken / IsDigits -------------------------------------------------------------------------

TEST(IsTokenTest, MatchesOneFirstCharacterAndThenAnyOfTheRest) {
  const CharSet name_first = {.others = "_"}, name_rest = {.others = "_.-"};
  EXPECT_TRUE(IsToken("lr", name_first, name_rest));
  EXPECT_TRUE(IsToken("_x.1-b", name_first, name_rest));
  EXPECT_TRUE(IsToken("9", name_first, name_rest));
  EXPECT_FALSE(IsToken("", name_first, name_rest));
  EXPECT_FALSE(IsToken(".x", name_first, name_rest));
  EXPECT_FALSE(IsToken("a b", name_first, name_rest));
  EXPECT_FALSE(IsToken("a/b", name_first, name_rest));
  // Listed characters count even where their class is left out: upper-case letters only.
  const CharSet upper = {.letters = false, .digits = false, .others = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"};
  EXPECT_TRUE(IsToken("USR1", upper, {.letters = false, .others = upper.others}));
  EXPECT_FALSE(IsToken("Usr1", upper, {.letters = false, .others = upper.others}));
  EXPECT_FALSE(IsToken("1USR", upper, {.letters = false, .others = upper.others}));
}

TEST(IsDigitsTest, AcceptsOnlyANonEmptyRunOfDigits) {
  EXPECT_TRUE(IsDigits("0"));
  EXPECT_TRUE(IsDigits("0123456789"));
  EXPECT_FALSE(IsDigits(""));
  EXPECT_FALSE(IsDigits("-1"));
  EXPECT_FALSE(IsDigits("1 "));
  EXPECT_FALSE(IsDigits("1.0"));
}

TEST(JoinTest, PutsTheSeparatorBetweenParts) {
  EXPECT_EQ(Join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(Join({"a"}, ", "), "a");
  EXPECT_EQ(Join({}, ", "), "");
}

// ---- Expression -------------------------------------------------------------------------------

double EvalOrDie(const std::string& text, const Config& config = {}) {
  auto e = Expression::Parse(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status().message();
  if (!e.ok()) return std::nan("");
  auto v = e->Evaluate(config);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().message();
  return v.ok() ? *v : std::nan("");
}

TEST(ExpressionTest, EvaluatesParameterReferences) {
  Config config = {{"a", int64_t{3}}, {"b", 0.5}, {"flag", true}};
  EXPECT_EQ(EvalOrDie("{a} * 2 + 1", config), 7.0);
  EXPECT_EQ(EvalOrDie("{a} * {b}", config), 1.5);
  EXPECT_EQ(EvalOrDie("{flag} + 1", config), 2.0);  // booleans count as 0 and 1
  EXPECT_EQ(EvalOrDie("{a}", config), 3.0);
}

TEST(ExpressionTest, MultiplicationBindsTighterThanAddition) {
  EXPECT_EQ(EvalOrDie("1 + 2 * 3"), 7.0);
  EXPECT_EQ(EvalOrDie("2 * 3 + 1"), 7.0);
  EXPECT_EQ(EvalOrDie("1 + 6 / 3"), 3.0);
}

TEST(ExpressionTest, SubtractionAndDivisionAssociateToTheLeft) {
  EXPECT_EQ(EvalOrDie("10 - 4 - 3"), 3.0);
  EXPECT_EQ(EvalOrDie("8 / 2 / 2"), 2.0);
  EXPECT_EQ(EvalOrDie("2-1"), 1.0);
}

TEST(ExpressionTest, ParenthesesOverridePrecedence) {
  EXPECT_EQ(EvalOrDie("(1 + 2) * 3"), 9.0);
  EXPECT_EQ(EvalOrDie("((2))"), 2.0);
  EXPECT_EQ(EvalOrDie("2 * (3 - (4 - 1))"), 0.0);
}

TEST(ExpressionTest, UnaryMinusNegates) {
  Config config = {{"a", int64_t{3}}};
  EXPECT_EQ(EvalOrDie("-{a} + 1", config), -2.0);
  EXPECT_EQ(EvalOrDie("2 - -3"), 5.0);
  EXPECT_EQ(EvalOrDie("--4"), 4.0);
  EXPECT_EQ(EvalOrDie("-(1 + 2) * 2"), -6.0);
}

TEST(ExpressionTest, ReadsNumbersWithExponents) {
  EXPECT_EQ(EvalOrDie("1.5e2"), 150.0);
  EXPECT_EQ(EvalOrDie("2e-1 * 10"), 2.0);
}

TEST(ExpressionTest, ListsReferencesOnceInOrderOfFirstAppearance) {
  auto e = Expression::Parse("{b} * {a} + {b}");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_THAT(e->references(), ::testing::ElementsAre("b", "a"));
  EXPECT_EQ(e->text(), "{b} * {a} + {b}");
}

TEST(ExpressionTest, ConstantEvaluatesToItsValue) {
  Expression e = Expression::Constant(2.5);
  auto v = e.Evaluate({});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 2.5);
  EXPECT_TRUE(e.references().empty());
}

TEST(ExpressionTest, DivisionByZeroIsAnError) {
  auto e = Expression::Parse("1 / ({a} - 3)");
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto v = e->Evaluate({{"a", int64_t{3}}});
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("division by zero"));
  auto fine = e->Evaluate({{"a", int64_t{5}}});
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(*fine, 0.5);
}

TEST(ExpressionTest, MissingParameterIsAnErrorNamingIt) {
  auto e = Expression::Parse("{gpus} * 2");
  ASSERT_TRUE(e.ok());
  auto v = e->Evaluate({{"other", int64_t{1}}});
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("'gpus'"));
  EXPECT_THAT(v.status().message(), HasSubstr("has no value"));
}

TEST(ExpressionTest, NonNumericParameterIsAnError) {
  auto e = Expression::Parse("{opt} + 1");
  ASSERT_TRUE(e.ok());
  auto v = e->Evaluate({{"opt", std::string("sgd")}});
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("'opt' is not a number"));
}

TEST(ExpressionTest, SyntaxErrorsNameTheOffendingCharacter) {
  struct Case {
    const char* text;
    const char* position;  // "at character N"
    const char* what;
  };
  const Case cases[] = {
      {"1 +", "at character 4", "expected a number"},      // ran out after '+'
      {"2 * * 3", "at character 5", "expected a number"},  // the second '*'
      {"(1 + 2", "at character 7", "expected ')'"},
      {"1 2", "at character 3", "unexpected '2'"},
      {"{a} x", "at character 5", "unexpected 'x'"},
      {"{a + 1", "at character 1", "'{' is not closed"},
      {"{}", "at character 2", "empty parameter name"},
      {"", "at character 1", "expected a number"},
      {"abc", "at character 1", "expected a number"},
  };
  for (const Case& c : cases) {
    auto e = Expression::Parse(c.text);
    ASSERT_FALSE(e.ok()) << "'" << c.text << "' parsed";
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr(c.position)) << c.text;
    EXPECT_THAT(e.status().message(), HasSubstr(c.what)) << c.text;
  }
}

// ---- ConfigToJson / ConfigFromJson ----------------------------------------------------------

TEST(ConfigJsonTest, RoundTripKeepsEveryValueAndItsType) {
  Config config = {{"flag", true},
                   {"off", false},
                   {"batch_size", int64_t{64}},
                   {"big", int64_t{1} << 60},
                   {"negative", int64_t{-3}},
                   {"learning_rate", 1e-5},
                   {"one", 1.0},  // a whole double must stay a double
                   {"third", 1.0 / 3.0},
                   {"optimizer", std::string("adamw")},
                   {"quoted", std::string("say \"hi\"\n")},
                   {"digits", std::string("42")}};
  std::string json = ConfigToJson(config);
  auto back = ConfigFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), config.size()) << json;
  for (const auto& [name, value] : config) {
    auto it = back->find(name);
    ASSERT_NE(it, back->end()) << name;
    EXPECT_EQ(it->second.index(), value.index()) << name << " in " << json;
    EXPECT_EQ(it->second, value) << name << " in " << json;
  }
}

TEST(ConfigJsonTest, WritesKeysInSpaceOrderWhenGivenASpace) {
  std::vector<ParamSpec> params(2);
  params[0].name = "zeta";
  params[0].type = ParamType::kFixed;
  params[0].value = int64_t{1};
  params[1].name = "alpha";
  params[1].type = ParamType::kFixed;
  params[1].value = int64_t{2};
  SearchSpace space(params);
  Config config = {{"alpha", int64_t{2}}, {"zeta", int64_t{1}}};
  EXPECT_EQ(ConfigToJson(config, &space), R"({"zeta":1,"alpha":2})");
  EXPECT_EQ(ConfigToJson(config), R"({"alpha":2,"zeta":1})");
}

// A structured parameter's value is JSON text in a Config, and decoded where the program reads it.
TEST(ConfigJsonTest, StructuredValuesAreHandedOverDecodedAndReadBackAsTheirText) {
  std::vector<ParamSpec> params(2);
  params[0].name = "files";
  params[0].type = ParamType::kFixed;
  params[0].structured = true;
  params[0].value = std::string(R"(["a.yml","b.yml"])");
  params[1].name = "name";
  params[1].type = ParamType::kFixed;
  params[1].value = std::string(R"(["not","decoded"])");
  SearchSpace space(params);
  Config config = {{"files", params[0].value}, {"name", params[1].value}};
  const std::string json = ConfigToJson(config, &space);
  EXPECT_EQ(json, R"({"files":["a.yml","b.yml"],"name":"[\"not\",\"decoded\"]"})");
  auto back = ConfigFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, config);
}

TEST(ConfigJsonTest, RejectsTextThatIsNotAnObjectOfValues) {
  for (const char* json : {"", "[1, 2]", "{", "42", R"({"a": null})"}) {
    auto c = ConfigFromJson(json);
    EXPECT_FALSE(c.ok()) << json;
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << json;
    }
  }
}

// ---- SearchSpace ------------------------------------------------------------------------------

// optimizer: [sgd, adamw]; momentum: float when optimizer == sgd;
// layers: int 1..3; width: int 32..128 step 32 when layers in [2, 3]; dropout: float when
// width != 64 (a grandchild: inactive whenever width is).
SearchSpace ConditionalSpace() {
  std::vector<ParamSpec> params;
  ParamSpec optimizer;
  optimizer.name = "optimizer";
  optimizer.type = ParamType::kCategorical;
  optimizer.values = {std::string("sgd"), std::string("adamw")};
  params.push_back(optimizer);

  ParamSpec momentum;
  momentum.name = "momentum";
  momentum.type = ParamType::kFloat;
  momentum.low = 0.0;
  momentum.high = 0.99;
  momentum.when =
      Condition{"optimizer", Condition::Op::kEq, {std::string("sgd")}, "optimizer == sgd"};
  params.push_back(momentum);

  ParamSpec layers;
  layers.name = "layers";
  layers.type = ParamType::kInt;
  layers.low = 1;
  layers.high = 3;
  params.push_back(layers);

  ParamSpec width;
  width.name = "width";
  width.type = ParamType::kInt;
  width.low = 32;
  width.high = 128;
  width.step = 32;
  width.when =
      Condition{"layers", Condition::Op::kIn, {int64_t{2}, int64_t{3}}, "layers in [2, 3]"};
  params.push_back(width);

  ParamSpec dropout;
  dropout.name = "dropout";
  dropout.type = ParamType::kFloat;
  dropout.low = 0.0;
  dropout.high = 0.5;
  dropout.when = Condition{"width", Condition::Op::kNe, {int64_t{64}}, "width != 64"};
  params.push_back(dropout);
  return SearchSpace(params);
}

TEST(SearchSpaceTest, ConditionalParameterIsActiveOnlyWhenItsConditionHolds) {
  SearchSpace space = ConditionalSpace();
  const ParamSpec& momentum = *space.Find("momentum");
  EXPECT_TRUE(space.IsActive(*space.Find("optimizer"), {}));
  EXPECT_TRUE(space.IsActive(momentum, {{"optimizer", std::string("sgd")}}));
  EXPECT_FALSE(space.IsActive(momentum, {{"optimizer", std::string("adamw")}}));
  EXPECT_FALSE(space.IsActive(momentum, {}));  // parent not chosen yet

  const ParamSpec& width = *space.Find("width");
  EXPECT_FALSE(space.IsActive(width, {{"layers", int64_t{1}}}));
  EXPECT_TRUE(space.IsActive(width, {{"layers", int64_t{2}}}));
  EXPECT_TRUE(space.IsActive(width, {{"layers", int64_t{3}}}));

  const ParamSpec& dropout = *space.Find("dropout");
  EXPECT_TRUE(space.IsActive(dropout, {{"layers", int64_t{2}}, {"width", int64_t{32}}}));
  EXPECT_FALSE(space.IsActive(dropout, {{"layers", int64_t{2}}, {"width", int64_t{64}}}));
}

TEST(SearchSpaceTest, ChildOfAnInactiveParentIsInactive) {
  SearchSpace space = ConditionalSpace();
  // width is inactive (layers == 1), so dropout is too, whatever a stale width value says.
  EXPECT_FALSE(
      space.IsActive(*space.Find("dropout"), {{"layers", int64_t{1}}, {"width", int64_t{32}}}));
}

TEST(SearchSpaceTest, ValidateAcceptsConfigsHoldingExactlyTheActiveParameters) {
  SearchSpace space = ConditionalSpace();
  EXPECT_TRUE(
      space.Validate({{"optimizer", std::string("sgd")}, {"momentum", 0.9}, {"layers", int64_t{1}}})
          .ok());
  EXPECT_TRUE(
      space
          .Validate(
              {{"optimizer", std::string("adamw")}, {"layers", int64_t{3}}, {"width", int64_t{64}}})
          .ok());
  EXPECT_TRUE(space
                  .Validate({{"optimizer", std::string("adamw")},
                             {"layers", int64_t{2}},
                             {"width", int64_t{128}},
                             {"dropout", 0.25}})
                  .ok());
}

TEST(SearchSpaceTest, ValidateRejectsMissingInactiveUnknownAndOutOfRangeParameters) {
  SearchSpace space = ConditionalSpace();
  struct Case {
    Config config;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {{{"optimizer", std::string("sgd")}, {"layers", int64_t{1}}}, "'momentum' is missing"},
      {{{"optimizer", std::string("adamw")}, {"momentum", 0.5}, {"layers", int64_t{1}}},
       "'momentum' is set but inactive (optimizer == sgd)"},
      {{{"optimizer", std::string("rmsprop")}, {"layers", int64_t{1}}}, "'optimizer': rmsprop"},
      {{{"optimizer", std::string("sgd")}, {"momentum", 1.5}, {"layers", int64_t{1}}},
       "'momentum': 1.5"},
      {{{"optimizer", std::string("adamw")},
        {"layers", int64_t{2}},
        {"width", int64_t{48}},
        {"dropout", 0.1}},
       "'width': 48"},  // not on the step grid
      {{{"optimizer", std::string("adamw")}, {"layers", 2.0}, {"width", int64_t{64}}},
       "'layers': 2"},  // an int parameter needs an int value
      {{{"optimizer", std::string("adamw")}, {"layers", int64_t{1}}, {"depth", int64_t{1}}},
       "unknown parameter 'depth'"},
  };
  for (const Case& c : cases) {
    Status s = space.Validate(c.config);
    EXPECT_FALSE(s.ok()) << c.fragment;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment));
  }
}

TEST(ParamSpecTest, CardinalityCountsTheValuesOnTheStepGrid) {
  ParamSpec p;
  p.type = ParamType::kInt;
  p.low = 2;
  p.high = 10;
  p.step = 3;  // 2, 5, 8
  EXPECT_EQ(p.Cardinality(), 3);
  EXPECT_TRUE(p.Contains(int64_t{8}));
  EXPECT_FALSE(p.Contains(int64_t{10}));
}

TEST(ValuesEqualTest, TreatsIntAndDoubleHoldingTheSameNumberAsEqual) {
  EXPECT_TRUE(ValuesEqual(int64_t{2}, 2.0));
  EXPECT_FALSE(ValuesEqual(int64_t{2}, 2.5));
  EXPECT_FALSE(ValuesEqual(true, int64_t{1}));
  EXPECT_FALSE(ValuesEqual(std::string("2"), int64_t{2}));
}

TEST(TextTest, HtmlEscapeEscapesTheFiveSpecialCharactersAndNothingElse) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">'&'</a> \xc3\xa9"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt; \xc3\xa9");
  EXPECT_EQ(HtmlEscape(""), "");
}

TEST(TextTest, SplitHostPortTakesTheLastColonAndAPortInRange) {
  auto v4 = SplitHostPort("127.0.0.1:8080");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->first, "127.0.0.1");
  EXPECT_EQ(v4->second, 8080);
  EXPECT_EQ(SplitHostPort("[::1]:0")->first, "[::1]");
  EXPECT_FALSE(SplitHostPort("host").ok());
  EXPECT_FALSE(SplitHostPort(":80").ok());
  EXPECT_FALSE(SplitHostPort("host:65536").ok());
  EXPECT_FALSE(SplitHostPort("host:http").ok());
}

// ---- The warm trainer's protocol (hyperpack/warm.h) ----

TEST(WarmTest, ATrainerCommandOfPlainWordsIsServedAnythingTheShellMustReadIsNot) {
  using Words = std::vector<std::string>;
  EXPECT_EQ(warm::TrainerArgv("hyperpack-trainer --lr 0.1  --model mlp"),
            (Words{"hyperpack-trainer", "--lr", "0.1", "--model", "mlp"}));
  EXPECT_EQ(warm::TrainerArgv("\t/opt/hp/bin/hyperpack-trainer --save-params /tmp/t-3/p.bin"),
            (Words{"/opt/hp/bin/hyperpack-trainer", "--save-params", "/tmp/t-3/p.bin"}));
  for (const char* command :
       {"python3 train.py --lr 0.1", "hyperpack-trainer-old --lr 1", "my-hyperpack-trainer",
        "X=1 hyperpack-trainer", "hyperpack-trainer --data-path \"a b\"",
        "hyperpack-trainer --lr $LR", "hyperpack-trainer > out.log", "hyperpack-trainer; echo done",
        "hyperpack-trainer && rm -rf x", "hyperpack-trainer --data-path ~/d",
        "hyperpack-trainer --x `id`", "hyperpack-trainer\necho", "", "   "})
    EXPECT_FALSE(warm::TrainerArgv(command).has_value()) << command;
}

TEST(WarmTest, ARunRequestAndATrialsEndSurviveTheirTripAndJunkIsRefused) {
  warm::RunRequest r{{"hyperpack-trainer", "--lr", "0.1"}, {"A=1", "B=x=y", "C="}, "/tmp/w d"};
  auto back = warm::ParseRun(warm::FormatRun(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->argv, r.argv);
  EXPECT_EQ(back->env, r.env);
  EXPECT_EQ(back->workdir, r.workdir);
  for (const char* junk : {"", "run", "run {", "run []", "run {\"argv\": [], \"env\": []}",
                           "run {\"argv\": [\"x\"], \"env\": [1]}", "continue 3",
                           "run {\"argv\": [\"x\"], \"env\": [], \"workdir\": 2}"})
    EXPECT_FALSE(warm::ParseRun(junk).ok()) << junk;
  using How = warm::TrialEnd::How;
  for (warm::TrialEnd end : {warm::TrialEnd{How::kExited, 0}, warm::TrialEnd{How::kExited, 3},
                             warm::TrialEnd{How::kSignaled, 15}})
    EXPECT_EQ(warm::ParseEnd(warm::FormatEnd(end)), end);
  for (const char* junk : {"", "exit", "exit -1", "exit 256", "signal x", "exited 0", "run 1"})
    EXPECT_FALSE(warm::ParseEnd(junk).has_value()) << junk;
}

TEST(WarmTest, APacketCarriesItsDescriptorsAndOneTooLargeIsRefused) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const int sent_fds[1] = {pipe_fds[1]};
  ASSERT_TRUE(warm::Send(pair[0], "run {}", sent_fds).ok());
  ASSERT_TRUE(warm::Send(pair[0], "exit 0").ok());
  std::vector<int> fds;
  auto first = warm::Receive(pair[1], &fds);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ(**first, "run {}");
  ASSERT_EQ(fds.size(), 1u);
  // The descriptor received is the pipe's write end: what goes in comes out of the pipe.
  ASSERT_EQ(write(fds[0], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  auto second = warm::Receive(pair[1], &fds);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(**second, "exit 0") << "one packet, one message";
  EXPECT_FALSE(warm::Send(pair[0], std::string(warm::kMaxMessage + 1, 'x')).ok());
  close(pair[0]);
  auto end = warm::Receive(pair[1], &fds);
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value()) << "end of file";
  for (int fd : {pair[1], pipe_fds[0], pipe_fds[1], fds[0]}) close(fd);
}

}  // namespace
}  // namespace hyperpack
