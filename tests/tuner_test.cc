// Tests for hyperpack::tuner: the unit-cube encoding of a search space, the random and Sobol
// samplers behind MakeTuner, and the scrambled Sobol sequence itself.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/tuner/cost_model.h"
#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/importance.h"
#include "hyperpack/tuner/recommend.h"
#include "hyperpack/tuner/tuner.h"
#include "sobol.h"
#include "tuner_drive.h"

namespace hyperpack::tuner {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// ---- building spaces
// ------------------------------------------------------------------------------

ParamSpec Categorical(const std::string& name, std::vector<Value> values) {
  ParamSpec p;
  p.name = name;
  p.type = ParamType::kCategorical;
  p.values = std::move(values);
  return p;
}

ParamSpec Fixed(const std::string& name, Value value) {
  ParamSpec p;
  p.name = name;
  p.type = ParamType::kFixed;
  p.value = std::move(value);
  return p;
}

ParamSpec When(ParamSpec p, const std::string& parent, Condition::Op op, std::vector<Value> values,
               const std::string& text) {
  p.when = Condition{parent, op, std::move(values), text};
  return p;
}

Value S(const char* s) { return Value(std::string(s)); }
Value I(int64_t i) { return Value(i); }

// Every kind of parameter, with conditions of every kind (==, in, !=) and a grandchild.
SearchSpace MixedSpace() {
  return SearchSpace({
      Float("lr", 1e-5, 0.1, /*log=*/true),
      Float("dropout", -0.5, 0.5),
      Int("batch", 16, 512, 1, /*log=*/true),
      Int("layers", 1, 9, 2),  // 1, 3, 5, 7, 9
      Categorical("optimizer", {S("sgd"), S("adamw"), S("rmsprop")}),
      Categorical("activation", {S("relu"), I(1), Value(0.5), Value(true), S("1")}),
      Fixed("epochs", I(20)),
      When(Float("momentum", 0.0, 0.99), "optimizer", Condition::Op::kEq, {S("sgd")},
           "optimizer == sgd"),
      When(Categorical("nesterov", {Value(true), Value(false)}), "optimizer", Condition::Op::kIn,
           {S("sgd"), S("rmsprop")}, "optimizer in [sgd, rmsprop]"),
      When(Int("width", 32, 128, 32), "layers", Condition::Op::kNe, {I(1)}, "layers != 1"),
      When(Float("decay", 0.0, 1.0), "width", Condition::Op::kEq, {I(64)}, "width == 64"),
  });
}

// ---- Encoder: layout --------------------------------------------------------------------------

TEST(EncoderTest, GivesNumericsOneDimensionCategoricalsOneEachValueAndFixedNone) {
  Encoder enc(SearchSpace({Float("a", 0, 1), Categorical("c", {S("x"), S("y"), S("z")}),
                           Fixed("f", I(3)), Int("n", 1, 4)}));
  EXPECT_EQ(enc.dims(), 5);
  EXPECT_EQ(enc.first_dim(0), 0);
  EXPECT_EQ(enc.num_dims(0), 1);
  EXPECT_EQ(enc.first_dim(1), 1);
  EXPECT_EQ(enc.num_dims(1), 3);
  EXPECT_EQ(enc.num_dims(2), 0);
  EXPECT_EQ(enc.first_dim(3), 4);
  EXPECT_EQ(enc.num_dims(3), 1);
  std::vector<int> owners;
  for (int d = 0; d < enc.dims(); ++d) owners.push_back(enc.param_of_dim(d));
  EXPECT_THAT(owners, ::testing::ElementsAre(0, 1, 1, 1, 3));
}

// ---- Encoder: round trips -----------------------------------------------------------------------

// Relative to the size of the range, so that values near zero on a linear scale are held to the
// same standard as the rest.
void ExpectCloseRelative(double actual, double expected, double scale, const std::string& what) {
  EXPECT_LE(std::abs(actual - expected), 1e-12 * std::max(std::abs(expected), scale))
      << what << ": " << actual << " vs " << expected;
}

TEST(EncoderTest, LinearFloatRoundTripsWithinRoundingError) {
  Encoder enc(SearchSpace({Float("x", -2.0, 3.0)}));
  std::mt19937_64 rng(1);
  std::vector<double> values = {-2.0, 3.0, 0.0, 1e-9, -1.25};
  for (int i = 0; i < 1000; ++i)
    values.push_back(-2.0 + 5.0 * static_cast<double>(rng() >> 11) * 0x1.0p-53);
  for (double v : values) {
    Encoder::Encoded e = enc.Encode({{"x", v}});
    ASSERT_EQ(e.x.size(), 1u);
    EXPECT_TRUE(e.active[0]);
    EXPECT_GE(e.x[0], 0.0);
    EXPECT_LE(e.x[0], 1.0);
    Config back = enc.Decode(e.x);
    ASSERT_TRUE(std::holds_alternative<double>(back.at("x")));
    ExpectCloseRelative(std::get<double>(back.at("x")), v, 5.0, "x");
  }
}

TEST(EncoderTest, LogFloatRoundTripsWithinRoundingError) {
  Encoder enc(SearchSpace({Float("lr", 1e-5, 0.1, /*log=*/true)}));
  std::mt19937_64 rng(2);
  std::vector<double> values = {1e-5, 0.1, 1e-3, 3.3e-4};
  for (int i = 0; i < 1000; ++i) {
    double t = std::log(1e-5) +
               (std::log(0.1) - std::log(1e-5)) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
    values.push_back(std::clamp(std::exp(t), 1e-5, 0.1));
  }
  for (double v : values) {
    Config back = enc.Decode(enc.Encode({{"lr", v}}).x);
    ASSERT_TRUE(std::holds_alternative<double>(back.at("lr")));
    ExpectCloseRelative(std::get<double>(back.at("lr")), v, 0.0, "lr");
  }
}

TEST(EncoderTest, LinearIntWithStepRoundTripsExactly) {
  ParamSpec p = Int("n", 2, 21, 3);  // 2, 5, ..., 20
  Encoder enc(SearchSpace({p}));
  int seen = 0;
  for (int64_t v = 2; v <= 21; v += 3) {
    Config back = enc.Decode(enc.Encode({{"n", v}}).x);
    EXPECT_EQ(back.at("n"), Value(v));
    ++seen;
  }
  EXPECT_EQ(seen, p.Cardinality());
}

TEST(EncoderTest, LogIntRoundTripsExactly) {
  Encoder enc(SearchSpace({Int("batch", 1, 4096, 1, /*log=*/true)}));
  for (int64_t v = 1; v <= 4096; ++v) {
    Config back = enc.Decode(enc.Encode({{"batch", v}}).x);
    ASSERT_EQ(back.at("batch"), Value(v)) << v;
  }
}

TEST(EncoderTest, CategoricalIsOneHotAndRoundTripsExactlyForMixedValueTypes) {
  std::vector<Value> values = {S("relu"), I(1), Value(1.0), Value(true), S("1"), Value(false)};
  Encoder enc(SearchSpace({Categorical("c", values)}));
  ASSERT_EQ(enc.dims(), static_cast<int>(values.size()));
  for (size_t k = 0; k < values.size(); ++k) {
    Encoder::Encoded e = enc.Encode({{"c", values[k]}});
    for (size_t j = 0; j < values.size(); ++j) {
      EXPECT_EQ(e.x[j], j == k ? 1.0 : 0.0) << "value " << k << " dim " << j;
      EXPECT_TRUE(e.active[j]);
    }
    Config back = enc.Decode(e.x);
    EXPECT_EQ(back.at("c").index(), values[k].index()) << k;
    EXPECT_EQ(back.at("c"), values[k]) << k;
  }
}

TEST(EncoderTest, FixedTakesNoDimensionAndAlwaysDecodesToItsValue) {
  Encoder enc(SearchSpace({Fixed("epochs", I(20)), Float("x", 0, 1), Fixed("mode", S("fast"))}));
  EXPECT_EQ(enc.dims(), 1);
  EXPECT_EQ(enc.num_dims(0), 0);
  EXPECT_EQ(enc.num_dims(2), 0);
  Config back = enc.Decode(std::vector<double>{0.25});
  EXPECT_EQ(back.at("epochs"), I(20));
  EXPECT_EQ(back.at("mode"), S("fast"));
  EXPECT_EQ(back.at("x"), Value(0.25));
}

TEST(EncoderTest, InactiveConditionalParameterHasInactiveDimsAndIsLeftOutOfDecode) {
  Encoder enc(SearchSpace({Categorical("optimizer", {S("sgd"), S("adamw")}),
                           When(Float("momentum", 0.0, 0.99), "optimizer", Condition::Op::kEq,
                                {S("sgd")}, "optimizer == sgd"),
                           When(Categorical("nesterov", {Value(true), Value(false)}), "optimizer",
                                Condition::Op::kEq, {S("sgd")}, "optimizer == sgd")}));
  ASSERT_EQ(enc.dims(), 5);
  Encoder::Encoded e = enc.Encode({{"optimizer", S("adamw")}});
  EXPECT_TRUE(e.active[0]);
  EXPECT_TRUE(e.active[1]);
  for (int d = 2; d < 5; ++d) {
    EXPECT_FALSE(e.active[d]) << d;
    EXPECT_EQ(e.x[d], 0.5) << d;
  }
  Config back = enc.Decode(e.x);
  EXPECT_EQ(back, (Config{{"optimizer", S("adamw")}}));

  // The same dims decode to values once the condition holds.
  Config active = {{"optimizer", S("sgd")}, {"momentum", 0.9}, {"nesterov", Value(false)}};
  Encoder::Encoded e2 = enc.Encode(active);
  EXPECT_TRUE(std::all_of(e2.active.begin(), e2.active.end(), [](bool a) { return a; }));
  Config back2 = enc.Decode(e2.x);
  EXPECT_EQ(back2.at("optimizer"), S("sgd"));
  EXPECT_EQ(back2.at("nesterov"), Value(false));
  ExpectCloseRelative(std::get<double>(back2.at("momentum")), 0.9, 0.99, "momentum");
}

TEST(EncoderTest, MixedSpaceRoundTripsConfigsDrawnFromIt) {
  Encoder enc(MixedSpace());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    std::vector<double> u(enc.space().size());
    for (double& x : u) x = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    Config c = enc.FromUnitPerParam(u);
    ASSERT_TRUE(enc.space().Validate(c).ok()) << enc.space().Validate(c).message();
    Config back = enc.Decode(enc.Encode(c).x);
    ASSERT_EQ(back.size(), c.size());
    for (const auto& [name, value] : c) {
      ASSERT_TRUE(back.count(name)) << name;
      if (std::holds_alternative<double>(value)) {
        const ParamSpec& p = *enc.space().Find(name);
        ExpectCloseRelative(std::get<double>(back.at(name)), std::get<double>(value),
                            p.log ? 0.0 : p.high - p.low, name);
      } else {
        EXPECT_EQ(back.at(name), value) << name;
      }
    }
  }
}

// ---- Encoder: every point of the cube is a valid configuration
// -------------------------------------

TEST(EncoderTest, DecodeOfAnyPointInTheCubeIsAValidConfig) {
  Encoder enc(MixedSpace());
  std::mt19937_64 rng(4);
  std::vector<std::vector<double>> points;
  points.push_back(std::vector<double>(enc.dims(), 0.0));
  points.push_back(std::vector<double>(enc.dims(), 1.0));
  points.push_back(std::vector<double>(enc.dims(), 0.5));
  for (int i = 0; i < 5000; ++i) {
    std::vector<double> x(enc.dims());
    for (double& v : x) {
      v = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      // Corners and edges too: where clamping and rounding are most likely to go wrong.
      if (rng() % 8 == 0) v = static_cast<double>(rng() % 2);
    }
    points.push_back(std::move(x));
  }
  std::set<std::string> seen_optimizers;
  int with_decay = 0;
  for (const auto& x : points) {
    Config c = enc.Decode(x);
    Status s = enc.space().Validate(c);
    ASSERT_TRUE(s.ok()) << s.message();
    seen_optimizers.insert(std::get<std::string>(c.at("optimizer")));
    with_decay += c.count("decay");
  }
  // The points exercised every branch of the conditions.
  EXPECT_EQ(seen_optimizers.size(), 3u);
  EXPECT_GT(with_decay, 0);
}

// ---- Encoder: FromUnitPerParam gives each discrete value the same chance
// ---------------------------

// Pearson's statistic for counts against equal expected frequencies.
double ChiSquare(const std::map<std::string, int>& counts, int categories, int draws) {
  double expected = static_cast<double>(draws) / categories;
  double chi2 = 0;
  int seen = 0;
  for (const auto& [value, n] : counts) {
    chi2 += (n - expected) * (n - expected) / expected;
    ++seen;
  }
  chi2 += (categories - seen) * expected;  // values never drawn
  return chi2;
}

TEST(EncoderTest, FromUnitPerParamGivesEveryDiscreteValueRoughlyEqualFrequency) {
  SearchSpace space({Int("n", 1, 7), Int("stepped", 0, 20, 5),
                     Categorical("c", {S("a"), I(2), Value(0.5), Value(true)}),
                     Int("big_step", 3, 30, 9)});  // 3, 12, 21, 30
  Encoder enc(space);
  const int kDraws = 70000;
  std::map<std::string, std::map<std::string, int>> counts;
  std::mt19937_64 rng(5);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<double> u(space.size());
    for (double& x : u) x = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    Config c = enc.FromUnitPerParam(u);
    ASSERT_TRUE(space.Validate(c).ok());
    for (const auto& [name, value] : c) ++counts[name][FormatValue(value)];
  }
  // With k values the statistic has k - 1 degrees of freedom (mean k - 1, sd sqrt(2(k - 1)), so
  // at most ~15 here); 40 is far out in the tail. A cell half as likely as the others (e.g. an
  // endpoint that only gets half a cell) gives a statistic in the thousands.
  struct Expect {
    const char* name;
    int categories;
  };
  for (Expect e : {Expect{"n", 7}, Expect{"stepped", 5}, Expect{"c", 4}, Expect{"big_step", 4}}) {
    EXPECT_EQ(static_cast<int>(counts[e.name].size()), e.categories) << e.name;
    EXPECT_LT(ChiSquare(counts[e.name], e.categories, kDraws), 40.0) << e.name;
  }
}

TEST(EncoderTest, FromUnitPerParamMapsTheEndsOfTheUnitIntervalToTheEndValues) {
  Encoder enc(SearchSpace({Int("n", 1, 7), Categorical("c", {S("a"), S("b"), S("c")})}));
  Config low = enc.FromUnitPerParam(std::vector<double>{0.0, 0.0});
  Config high =
      enc.FromUnitPerParam(std::vector<double>{std::nextafter(1.0, 0.0), std::nextafter(1.0, 0.0)});
  EXPECT_EQ(low.at("n"), I(1));
  EXPECT_EQ(low.at("c"), S("a"));
  EXPECT_EQ(high.at("n"), I(7));
  EXPECT_EQ(high.at("c"), S("c"));
}

TEST(EncoderTest, FromUnitPerParamLeavesOutParametersWhoseConditionFails) {
  Encoder enc(SearchSpace({Categorical("optimizer", {S("sgd"), S("adamw")}),
                           When(Float("momentum", 0.0, 0.99), "optimizer", Condition::Op::kEq,
                                {S("sgd")}, "optimizer == sgd")}));
  Config sgd = enc.FromUnitPerParam(std::vector<double>{0.25, 0.5});
  Config adamw = enc.FromUnitPerParam(std::vector<double>{0.75, 0.5});
  EXPECT_EQ(sgd.size(), 2u);
  EXPECT_EQ(adamw, (Config{{"optimizer", S("adamw")}}));
}

TEST(SameConfigTest, ComparesNamesAndValuesTreatingEqualNumbersAsEqual) {
  EXPECT_TRUE(SameConfig({{"a", I(2)}, {"b", S("x")}}, {{"a", Value(2.0)}, {"b", S("x")}}));
  EXPECT_FALSE(SameConfig({{"a", I(2)}}, {{"a", I(3)}}));
  EXPECT_FALSE(SameConfig({{"a", I(2)}}, {{"b", I(2)}}));
  EXPECT_FALSE(SameConfig({{"a", I(2)}}, {{"a", I(2)}, {"b", I(2)}}));
}

// ---- samplers ---------------------------------------------------------------------------------

class SamplerTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Tuner> Make(const SearchSpace& space, uint64_t seed) {
    TunerOptions options;
    options.algorithm = ParseTunerAlgorithm(GetParam()).value();
    options.seed = seed;
    auto tuner = MakeTuner(space, options);
    EXPECT_TRUE(tuner.ok()) << tuner.status().message();
    if (!tuner.ok()) return nullptr;
    EXPECT_EQ((*tuner)->name(), GetParam());
    return std::move(tuner).value();
  }

  static std::vector<Config> ProposeOrDie(Tuner& tuner, int n,
                                          std::span<const Config> pending = {}) {
    auto proposals = tuner.Propose(n, pending);
    EXPECT_TRUE(proposals.ok()) << proposals.status().message();
    return proposals.ok() ? *proposals : std::vector<Config>{};
  }

  static TrialOutcome Completed(const Config& c, double value) {
    TrialOutcome o;
    o.config = c;
    o.kind = TrialOutcome::Kind::kCompleted;
    o.value = value;
    return o;
  }
};

// 3 x 3 x 2 = 18 configurations: small enough that duplicates come up.
SearchSpace SmallDiscreteSpace() {
  return SearchSpace({Categorical("a", {S("x"), S("y"), S("z")}), Int("b", 1, 3),
                      Categorical("c", {Value(true), Value(false)})});
}

bool Contains(const std::vector<Config>& list, const Config& c) {
  return std::any_of(list.begin(), list.end(), [&](const Config& o) { return SameConfig(o, c); });
}

TEST_P(SamplerTest, SameSeedGivesIdenticalProposals) {
  auto a = Make(MixedSpace(), 42);
  auto b = Make(MixedSpace(), 42);
  ASSERT_TRUE(a && b);
  std::vector<Config> pa = ProposeOrDie(*a, 20);
  std::vector<Config> pb = ProposeOrDie(*b, 20);
  ASSERT_EQ(pa.size(), 20u);
  ASSERT_EQ(pb.size(), 20u);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i], pb[i]) << i;
  // And in several smaller calls: the sequence does not depend on how it is asked for.
  auto c = Make(MixedSpace(), 42);
  std::vector<Config> pc;
  for (int n : {1, 4, 7, 8}) {
    std::vector<Config> part = ProposeOrDie(*c, n);
    pc.insert(pc.end(), part.begin(), part.end());
  }
  ASSERT_EQ(pc.size(), 20u);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i], pc[i]) << i;
}

TEST_P(SamplerTest, DifferentSeedsGiveDifferentProposals) {
  auto a = Make(MixedSpace(), 1);
  auto b = Make(MixedSpace(), 2);
  ASSERT_TRUE(a && b);
  std::vector<Config> pa = ProposeOrDie(*a, 20);
  std::vector<Config> pb = ProposeOrDie(*b, 20);
  ASSERT_EQ(pa.size(), pb.size());
  int same = 0;
  for (size_t i = 0; i < pa.size(); ++i) same += SameConfig(pa[i], pb[i]);
  EXPECT_EQ(same, 0);  // every config holds a continuous lr: equal ones would be a coincidence
}

TEST_P(SamplerTest, ProposalsAreValidConfigurations) {
  auto tuner = Make(MixedSpace(), 7);
  ASSERT_TRUE(tuner);
  std::vector<Config> proposals = ProposeOrDie(*tuner, 300);
  ASSERT_EQ(proposals.size(), 300u);
  SearchSpace space = MixedSpace();
  for (const Config& c : proposals) {
    Status s = space.Validate(c);
    EXPECT_TRUE(s.ok()) << s.message();
  }
}

TEST_P(SamplerTest, ProposalsAreDistinctAndAvoidPendingConfigs) {
  SearchSpace space = SmallDiscreteSpace();
  auto first = Make(space, 3);
  ASSERT_TRUE(first);
  std::vector<Config> pending = ProposeOrDie(*first, 5);
  ASSERT_EQ(pending.size(), 5u);

  auto tuner = Make(space, 3);
  ASSERT_TRUE(tuner);
  std::vector<Config> proposals = ProposeOrDie(*tuner, 10, pending);
  ASSERT_EQ(proposals.size(), 10u);
  for (size_t i = 0; i < proposals.size(); ++i) {
    EXPECT_TRUE(space.Validate(proposals[i]).ok());
    EXPECT_FALSE(Contains(pending, proposals[i])) << "proposal " << i << " is pending";
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(SameConfig(proposals[i], proposals[j])) << i << "/" << j;
  }
}

TEST_P(SamplerTest, ProposalsAvoidObservedConfigs) {
  SearchSpace space = SmallDiscreteSpace();
  auto tuner = Make(space, 9);
  ASSERT_TRUE(tuner);
  std::vector<Config> all;
  for (int round = 0; round < 3; ++round) {
    std::vector<Config> batch = ProposeOrDie(*tuner, 5);
    for (const Config& c : batch) {
      EXPECT_FALSE(Contains(all, c));
      tuner->Observe(Completed(c, 1.0));
      all.push_back(c);
    }
  }
  EXPECT_EQ(all.size(), 15u);
}

TEST_P(SamplerTest, ResumedTunerContinuesTheSequenceInsteadOfRepeatingIt) {
  const int kDone = 4;
  auto original = Make(MixedSpace(), 11);
  ASSERT_TRUE(original);
  std::vector<Config> sequence = ProposeOrDie(*original, 10);
  ASSERT_EQ(sequence.size(), 10u);

  // A study rebuilt after a crash: the finished trials are observed again, then it asks for more.
  auto resumed = Make(MixedSpace(), 11);
  ASSERT_TRUE(resumed);
  for (int i = 0; i < kDone; ++i) resumed->Observe(Completed(sequence[i], i));
  std::vector<Config> next = ProposeOrDie(*resumed, 10 - kDone);
  ASSERT_EQ(next.size(), static_cast<size_t>(10 - kDone));
  for (size_t i = 0; i < next.size(); ++i) {
    EXPECT_FALSE(
        Contains(std::vector<Config>(sequence.begin(), sequence.begin() + kDone), next[i]));
    EXPECT_EQ(next[i], sequence[kDone + i]) << i;
  }
}

TEST_P(SamplerTest, SmallDiscreteSpaceIsExhausted) {
  SearchSpace space({Categorical("a", {S("x"), S("y")}), Categorical("b", {I(1), I(2)})});
  auto tuner = Make(space, 5);
  ASSERT_TRUE(tuner);
  // Asked for more than there are, it returns each of the 4 once.
  std::vector<Config> proposals = ProposeOrDie(*tuner, 10);
  EXPECT_EQ(proposals.size(), 4u);
  std::set<std::string> distinct;
  for (const Config& c : proposals)
    distinct.insert(FormatValue(c.at("a")) + FormatValue(c.at("b")));
  EXPECT_EQ(distinct.size(), proposals.size());

  // Once all 4 have been observed, there is nothing left to propose.
  auto resumed = Make(space, 5);
  ASSERT_TRUE(resumed);
  for (const char* a : {"x", "y"})
    for (int64_t b : {1, 2}) resumed->Observe(Completed({{"a", S(a)}, {"b", I(b)}}, 0.0));
  EXPECT_THAT(ProposeOrDie(*resumed, 3), IsEmpty());
}

TEST_P(SamplerTest, ObservedAndPendingTogetherCanExhaustTheSpace) {
  SearchSpace space({Categorical("a", {S("x"), S("y")}), Categorical("b", {I(1), I(2)})});
  auto tuner = Make(space, 6);
  ASSERT_TRUE(tuner);
  tuner->Observe(Completed({{"a", S("x")}, {"b", I(1)}}, 0.0));
  tuner->Observe(Completed({{"a", S("y")}, {"b", I(2)}}, 0.0));
  std::vector<Config> pending = {{{"a", S("x")}, {"b", I(2)}}};
  std::vector<Config> last = ProposeOrDie(*tuner, 2, pending);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0], (Config{{"a", S("y")}, {"b", I(1)}}));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, SamplerTest, ::testing::Values("random", "sobol"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(MakeTunerTest, RejectsUnknownAlgorithm) {
  auto tuner = ParseTunerAlgorithm("grid");
  ASSERT_FALSE(tuner.ok());
  EXPECT_EQ(tuner.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(tuner.status().message(), HasSubstr("unknown tuner algorithm 'grid'"));
}

TEST(MakeTunerTest, RejectsSobolForMoreParametersThanItHasDirectionNumbersFor) {
  std::vector<ParamSpec> params;
  for (int i = 0; i <= SobolSequence::kMaxDims; ++i)
    params.push_back(Float("p" + std::to_string(i), 0, 1));
  TunerOptions options;
  options.algorithm = TunerAlgorithm::kSobol;
  auto tuner = MakeTuner(SearchSpace(params), options);
  ASSERT_FALSE(tuner.ok());
  EXPECT_THAT(tuner.status().message(), HasSubstr("3667 parameters"));
}

// ---- SobolSequence
// --------------------------------------------------------------------------------

TEST(SobolSequenceTest, PointsLieStrictlyInsideTheUnitCube) {
  SobolSequence sobol(40, 123);
  for (uint64_t i = 0; i < 4096; ++i) {
    std::vector<double> x = sobol.Point(i);
    ASSERT_EQ(x.size(), 40u);
    for (double v : x) {
      ASSERT_GT(v, 0.0) << "point " << i;
      ASSERT_LT(v, 1.0) << "point " << i;
    }
  }
}

TEST(SobolSequenceTest, SameSeedGivesTheSamePointsAndAnotherSeedOthers) {
  SobolSequence a(5, 1), b(5, 1), c(5, 2);
  for (uint64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(a.Point(i), b.Point(i));
    EXPECT_NE(a.Point(i), c.Point(i));
  }
}

// The first 2^m points of a (scrambled) Sobol sequence put exactly one point in each interval
// [k/2^m, (k+1)/2^m) of every single dimension. A linear matrix scramble and a digital shift are
// bijections on the digits, so they keep this property.
TEST(SobolSequenceTest, FirstPowerOfTwoPointsStratifyEveryDimension) {
  const int kM = 8;
  const int kN = 1 << kM;
  for (uint64_t seed : {0u, 1u, 99u}) {
    SobolSequence sobol(10, seed);
    std::vector<std::vector<int>> counts(10, std::vector<int>(kN, 0));
    for (int i = 0; i < kN; ++i) {
      std::vector<double> x = sobol.Point(i);
      for (int d = 0; d < 10; ++d) ++counts[d][static_cast<int>(std::floor(x[d] * kN))];
    }
    for (int d = 0; d < 10; ++d)
      for (int k = 0; k < kN; ++k)
        EXPECT_EQ(counts[d][k], 1) << "seed " << seed << " dim " << d << " interval " << k;
  }
}

// Dimensions 0 and 1 of Sobol's sequence form a (0, m, 2)-net: 256 points, one in each of the
// 16 x 16 boxes.
TEST(SobolSequenceTest, FirstTwoDimensionsStratifyTheSquare) {
  for (uint64_t seed : {0u, 5u, 12345u}) {
    SobolSequence sobol(2, seed);
    std::vector<int> counts(16 * 16, 0);
    for (int i = 0; i < 256; ++i) {
      std::vector<double> x = sobol.Point(i);
      int bx = static_cast<int>(std::floor(x[0] * 16));
      int by = static_cast<int>(std::floor(x[1] * 16));
      ++counts[by * 16 + bx];
    }
    for (int b = 0; b < 256; ++b) EXPECT_EQ(counts[b], 1) << "seed " << seed << " box " << b;
  }
}

// The stratification holds for every block of 2^m consecutive points starting at a multiple of
// 2^m, not only the first: a resumed study's later proposals are as well spread as its first ones.
TEST(SobolSequenceTest, LaterAlignedBlocksAreStratifiedToo) {
  SobolSequence sobol(3, 8);
  const int kN = 64;
  for (uint64_t block : {1u, 7u, 1000u}) {
    std::vector<std::vector<int>> counts(3, std::vector<int>(kN, 0));
    for (int i = 0; i < kN; ++i) {
      std::vector<double> x = sobol.Point(block * kN + i);
      for (int d = 0; d < 3; ++d) ++counts[d][static_cast<int>(std::floor(x[d] * kN))];
    }
    for (int d = 0; d < 3; ++d)
      for (int k = 0; k < kN; ++k) EXPECT_EQ(counts[d][k], 1) << "block " << block << " dim " << d;
  }
}

TEST(Mix64Test, IsDeterministicAndSpreadsNearbyInputs) {
  EXPECT_EQ(Mix64(0), Mix64(0));
  std::set<uint64_t> outputs;
  for (uint64_t i = 0; i < 1000; ++i) outputs.insert(Mix64(i));
  EXPECT_EQ(outputs.size(), 1000u);
  // Neighbouring inputs differ in about half their output bits.
  int bits = __builtin_popcountll(Mix64(1) ^ Mix64(2));
  EXPECT_GT(bits, 16);
  EXPECT_LT(bits, 48);
}

// ---- parameter importance
// ------------------------------------------------------------------------------

double ImportanceOf(const std::vector<ParamImportance>& all, const std::string& name) {
  for (const ParamImportance& i : all)
    if (i.param == name) return i.importance;
  ADD_FAILURE() << name << " has no importance";
  return -1;
}

// The importance from `n` random configurations of {a, b in [0, 1], c in {x, y}, f fixed}, each
// scored by score(a, b, c == y).
template <typename Score>
std::vector<ParamImportance> ImportanceFor(Score score, int n = 40) {
  SearchSpace space(
      {Float("a", 0, 1), Float("b", 0, 1), Categorical("c", {S("x"), S("y")}), Fixed("f", I(7))});
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Config> configs;
  std::vector<double> values;
  for (int i = 0; i < n; ++i) {
    Config c{{"a", u(rng)}, {"b", u(rng)}, {"c", S(u(rng) < 0.5 ? "x" : "y")}, {"f", I(7)}};
    values.push_back(score(std::get<double>(c["a"]), std::get<double>(c["b"]),
                           std::get<std::string>(c["c"]) == "y"));
    configs.push_back(std::move(c));
  }
  Result<std::vector<ParamImportance>> r = ParameterImportance(space, configs, values);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<ParamImportance>{};
}

TEST(ImportanceTest, TheParameterTheObjectiveFollowsComesFirst) {
  auto by_a = ImportanceFor([](double a, double b, bool y) { return std::sin(6 * a) + 0.02 * b; });
  ASSERT_EQ(by_a.size(), 3u);  // the fixed parameter takes no dimension
  EXPECT_EQ(by_a[0].param, "a");
  double sum = 0;
  for (const ParamImportance& i : by_a) sum += i.importance;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_GT(ImportanceOf(by_a, "a"), 2 * ImportanceOf(by_a, "b"));
  EXPECT_GT(ImportanceOf(by_a, "a"), 2 * ImportanceOf(by_a, "c"));

  // The same trials, now scored by the categorical.
  auto by_c = ImportanceFor([](double a, double b, bool y) { return (y ? 3.0 : 0.0) + 0.05 * a; });
  ASSERT_EQ(by_c.size(), 3u);
  EXPECT_EQ(by_c[0].param, "c");
  EXPECT_GT(ImportanceOf(by_c, "c"), 2 * ImportanceOf(by_c, "b"));
}

TEST(ImportanceTest, TooFewTrialsFlatValuesAndMismatchedInputsAreErrors) {
  SearchSpace space({Float("a", 0, 1), Float("b", 0, 1)});
  std::vector<Config> configs;
  for (int i = 0; i < 6; ++i) configs.push_back({{"a", 0.1 * i}, {"b", 0.5}});
  std::vector<double> flat(6, 2.0);
  EXPECT_EQ(ParameterImportance(space, configs, flat).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<double> some = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(ParameterImportance(space, std::span(configs).first(3), std::span(some).first(3))
                .status()
                .code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParameterImportance(space, configs, std::span(some).first(5)).status().code(),
            StatusCode::kInvalidArgument);
  some[2] = std::nan("");
  EXPECT_EQ(ParameterImportance(space, configs, some).status().code(),
            StatusCode::kInvalidArgument);
}

// ---- the model's recommendation (RecommendByModel)

double XOf(const Config& c) { return std::get<double>(c.at("x")); }

// Single runs of f(x) = (x - 0.3)^2 over x in [0, 1] with noise of sd 0.02, at n points evenly
// spread or drawn uniformly, and last one lucky run at x = 0.9 whose value beats every other.
std::pair<std::vector<Config>, std::vector<double>> NoisyBowl(int n, bool uniform) {
  std::mt19937_64 rng(uniform ? 8 : 5);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<Config> configs;
  std::vector<double> values;
  for (int i = 0; i < n; ++i) {
    const double x = uniform ? u(rng) : (i + 0.5) / n;
    configs.push_back({{"x", x}});
    values.push_back((x - 0.3) * (x - 0.3) + noise(rng));
  }
  configs.push_back({{"x", 0.9}});
  values.push_back(*std::min_element(values.begin(), values.end()) - 0.05);
  return {configs, values};
}

// Single trainings of a noisy bowl and one lucky run far from the optimum (NoisyBowl): the model
// recommends near the optimum, the best single value is the lucky run, and top_k 1 keeps to it.
TEST(RecommendTest, TheModelPassesOverALuckyRunForTheBestNeighbourhood) {
  SearchSpace space({Float("x", 0, 1)});
  auto [configs, values] = NoisyBowl(30, /*uniform=*/false);
  Result<Recommendation> r = RecommendByModel(space, configs, values);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->differs);
  EXPECT_NEAR(XOf(configs[r->index]), 0.3, 0.12);
  EXPECT_GT(r->noise_share, 0.01);  // the noise is learnt, not interpolated

  RecommendOptions one;
  one.top_k = 1;
  r = RecommendByModel(space, configs, values, one);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->differs);
  EXPECT_EQ(r->index, configs.size() - 1);
}

// A long study (1500 runs, as many as a fit could not take in seconds) is fitted on its best runs
// and recommends as a short one does.
TEST(RecommendTest, ALongStudyIsFittedOnItsBestRuns) {
  SearchSpace space({Float("x", 0, 1)});
  auto [configs, values] = NoisyBowl(1500, /*uniform=*/true);
  Result<Recommendation> r = RecommendByModel(space, configs, values);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->differs);
  EXPECT_NEAR(XOf(configs[r->index]), 0.3, 0.12);
}

// Without noise the best value is where the model's mean is best.
TEST(RecommendTest, WithoutNoiseTheBestValueIsRecommended) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Config> configs;
  std::vector<double> values;
  for (int i = 0; i < 25; ++i) {
    const double x = u(rng), y = u(rng);
    configs.push_back({{"x", x}, {"y", y}});
    values.push_back(std::pow(x - 0.6, 2) + std::pow(y - 0.4, 2));
  }
  Result<Recommendation> r = RecommendByModel(space, configs, values);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->differs);
  EXPECT_EQ(r->index,
            static_cast<size_t>(std::min_element(values.begin(), values.end()) - values.begin()));
}

TEST(RecommendTest, TooFewRunsFlatValuesAndMismatchedInputsAreErrors) {
  SearchSpace space({Float("x", 0, 1)});
  std::vector<Config> configs;
  for (int i = 0; i < 10; ++i) configs.push_back({{"x", 0.1 * i}});
  std::vector<double> flat(10, 2.0);
  EXPECT_EQ(RecommendByModel(space, configs, flat).status().code(),
            StatusCode::kFailedPrecondition);
  std::vector<double> some = {5, 4, 3, 2, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(RecommendByModel(space, configs, std::span(some).first(9)).status().code(),
            StatusCode::kInvalidArgument);
  // Non-finite values are left out, and count for nothing toward min_runs.
  some[0] = some[1] = some[2] = std::nan("");
  EXPECT_EQ(RecommendByModel(space, configs, some).status().code(),
            StatusCode::kFailedPrecondition);
  some[0] = some[1] = 7;
  Result<Recommendation> r = RecommendByModel(space, configs, some);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->index, 2u);
}

// ---- the cost model
// ------------------------------------------------------------------------------

// A data-parallel degree that buys sub-linear speed, a learning rate that costs nothing, and bf16
// dearer on a CPU: what the configurations of {lr, dp in {1, 2, 4}, precision} cost, with 5% noise.
double TrueCost(double lr, int dp, bool bf16) {
  (void)lr;
  return 30.0 * std::pow(dp, 0.7) * (bf16 ? 8.0 : 1.0);
}

SearchSpace CostSpace() {
  return SearchSpace({Float("lr", 1e-4, 1e-1, /*log=*/true), Categorical("dp", {I(1), I(2), I(4)}),
                      Categorical("precision", {S("fp32"), S("bf16")})});
}

Config CostConfig(double lr, int dp, bool bf16) {
  return {{"lr", lr}, {"dp", I(dp)}, {"precision", S(bf16 ? "bf16" : "fp32")}};
}

TEST(CostModelTest, PredictsWhatUnseenConfigurationsCostWithinTheirSpread) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> noise(0, 0.05);
  const int dps[] = {1, 2, 4};
  std::vector<Config> configs;
  std::vector<double> costs;
  for (int i = 0; i < 24; ++i) {
    const double lr = std::pow(10.0, -4 + 3 * unit(rng));
    const int dp = dps[i % 3];
    const bool bf16 = (i / 3) % 2 == 1;
    configs.push_back(CostConfig(lr, dp, bf16));
    costs.push_back(TrueCost(lr, dp, bf16) * std::exp(noise(rng)));
  }
  Result<CostModel> model = CostModel::Fit(CostSpace(), configs, costs);
  ASSERT_TRUE(model.ok()) << model.status().message();
  for (const double lr : {2e-4, 3e-3, 5e-2}) {
    for (const int dp : dps) {
      for (const bool bf16 : {false, true}) {
        const double truth = TrueCost(lr, dp, bf16);
        const CostPrediction p = model->Predict(CostConfig(lr, dp, bf16));
        EXPECT_NEAR(std::log(p.median), std::log(truth), 0.2) << lr << " " << dp << " " << bf16;
        EXPECT_LE(p.Low(), truth * 1.1) << lr << " " << dp << " " << bf16;
        EXPECT_GE(p.High(), truth / 1.1) << lr << " " << dp << " " << bf16;
        EXPECT_LT(p.log_sd, 0.5) << "seen often: the spread is the runs' own";
      }
    }
  }
  // Each trial that ran, predicted without it, is still near what it cost.
  const std::vector<CostPrediction> loo = model->LeaveOneOut();
  ASSERT_EQ(loo.size(), costs.size());
  for (size_t i = 0; i < costs.size(); ++i)
    EXPECT_NEAR(std::log(loo[i].median), std::log(costs[i]), 0.3) << i;
}

TEST(CostModelTest, IsLessSureFarFromWhatRan) {
  // Only small learning rates ran; cost grows with the learning rate's log.
  SearchSpace space({Float("lr", 1e-4, 1e-1, /*log=*/true)});
  std::vector<Config> configs;
  std::vector<double> costs;
  for (int i = 0; i < 8; ++i) {
    const double lr = std::pow(10.0, -4 + 0.1 * i);
    configs.push_back({{"lr", lr}});
    costs.push_back(10 * std::exp(std::log10(lr) + 4));
  }
  Result<CostModel> model = CostModel::Fit(space, configs, costs);
  ASSERT_TRUE(model.ok()) << model.status().message();
  const CostPrediction near = model->Predict({{"lr", 2e-4}});
  const CostPrediction far = model->Predict({{"lr", 9e-2}});
  EXPECT_GT(far.log_sd, 2 * near.log_sd);
  EXPECT_NEAR(near.median, 10 * std::exp(std::log10(2e-4) + 4), 1.0);
}

TEST(CostModelTest, TooFewCostsOrOnesThatAreNotPositiveAreErrors) {
  SearchSpace space = CostSpace();
  std::vector<Config> configs = {CostConfig(1e-3, 1, false), CostConfig(1e-2, 2, false),
                                 CostConfig(1e-3, 4, true)};
  std::vector<double> costs = {10, 20, 40};
  EXPECT_TRUE(CostModel::Fit(space, configs, costs).ok());
  EXPECT_EQ(
      CostModel::Fit(space, std::span(configs).first(2), std::span(costs).first(2)).status().code(),
      StatusCode::kFailedPrecondition);
  EXPECT_EQ(CostModel::Fit(space, configs, std::span(costs).first(2)).status().code(),
            StatusCode::kInvalidArgument);
  for (const double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    costs[1] = bad;
    EXPECT_EQ(CostModel::Fit(space, configs, costs).status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  // Costs all alike: their own level.
  costs = {25, 25, 25};
  Result<CostModel> flat = CostModel::Fit(space, configs, costs);
  ASSERT_TRUE(flat.ok()) << flat.status().message();
  EXPECT_NEAR(flat->Predict(CostConfig(5e-2, 2, true)).median, 25, 2.5);
}

}  // namespace
}  // namespace hyperpack::tuner
