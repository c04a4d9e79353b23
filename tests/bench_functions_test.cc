// Tests for the benchmark's test functions (bench/functions.h): each attains its stated minimum at
// its stated minimiser and nowhere else we look, and bench/optuna_regret.py computes the same
// values.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "functions.h"
#include "hyperpack/config_json.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/tuner.h"
#include "test_util.h"

namespace hyperpack::bench {
namespace {

constexpr double kPi = std::numbers::pi;

// `count` random configurations of f's space, drawn by hyperpack's random sampler.
std::vector<Config> RandomConfigs(const TestFunction& f, int count, uint64_t seed) {
  tuner::TunerOptions options;
  options.algorithm = tuner::TunerAlgorithm::kRandom;
  options.seed = seed;
  auto tuner = tuner::MakeTuner(f.space, options);
  EXPECT_TRUE(tuner.ok()) << tuner.status().message();
  if (!tuner.ok()) return {};
  auto configs = (*tuner)->Propose(count, {});
  EXPECT_TRUE(configs.ok()) << configs.status().message();
  return configs.ok() ? *configs : std::vector<Config>{};
}

TEST(BenchFunctionsTest, EveryFunctionHasItsStatedMinimumAtItsMinimiser) {
  ASSERT_EQ(FunctionNames(),
            (std::vector<std::string>{"branin", "hartmann6", "ackley5", "levy10", "rosenbrock4",
                                      "mixed", "stump5", "ledge2"}));
  for (const TestFunction& f : AllFunctions()) {
    SCOPED_TRACE(f.name);
    EXPECT_TRUE(f.space.Validate(f.argmin).ok()) << f.space.Validate(f.argmin).message();
    EXPECT_NEAR(f.Evaluate(f.argmin), f.f_min, 1e-9);
  }
}

TEST(BenchFunctionsTest, KnownMinimaMatchTheLiterature) {
  EXPECT_NEAR(FindFunction("branin")->f_min, 0.397887, 1e-6);
  EXPECT_NEAR(FindFunction("hartmann6")->f_min, -3.32237, 1e-5);
  EXPECT_EQ(FindFunction("ackley5")->f_min, 0.0);
  EXPECT_EQ(FindFunction("levy10")->f_min, 0.0);
  EXPECT_EQ(FindFunction("rosenbrock4")->f_min, 0.0);
  EXPECT_EQ(FindFunction("mixed")->f_min, 0.0);
  // The 6-decimal minimiser usually quoted for Hartmann-6 gives the same value to 1e-5.
  const double quoted[] = {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573};
  EXPECT_NEAR(Hartmann6(quoted), -3.32237, 1e-5);
}

TEST(BenchFunctionsTest, BraninHasThreeGlobalMinimisers) {
  const double expected = FindFunction("branin")->f_min;
  EXPECT_NEAR(Branin(-kPi, 12.275), expected, 1e-12);
  EXPECT_NEAR(Branin(kPi, 2.275), expected, 1e-12);
  EXPECT_NEAR(Branin(3 * kPi, 2.475), expected, 1e-12);
}

TEST(BenchFunctionsTest, RandomConfigurationsAreWorseThanTheMinimum) {
  for (const TestFunction& f : AllFunctions()) {
    SCOPED_TRACE(f.name);
    int at_min = 0;
    for (const Config& c : RandomConfigs(f, 500, 11)) {
      ASSERT_TRUE(f.space.Validate(c).ok());
      const double v = f.Evaluate(c);
      EXPECT_GE(v, f.f_min - 1e-12) << ConfigToJson(c);
      at_min += v <= f.f_min + 1e-6;
    }
    // A function flat in pieces holds its minimum on a region, which must stay rare (ledge2's
    // band is 0.7% of the space); a smooth one only at points.
    EXPECT_LE(at_min, f.flat_in_pieces ? 10 : 0);
  }
}

TEST(BenchFunctionsTest, SmallStepsAwayFromTheMinimiserIncreaseTheValue) {
  for (const TestFunction& f : AllFunctions()) {
    if (f.flat_in_pieces) continue;  // StumpIsFlatInPiecesAndQuantised
    SCOPED_TRACE(f.name);
    const double at_min = f.Evaluate(f.argmin);
    for (const ParamSpec& p : f.space.params()) {
      if (p.type != ParamType::kFloat) continue;
      for (double sign : {-1.0, 1.0}) {
        Config moved = f.argmin;
        const double x = *ValueAsNumber(moved[p.name]);
        const double step =
            p.log ? x * (std::pow(10.0, 0.01 * sign) - 1.0) : sign * 1e-3 * (p.high - p.low);
        moved[p.name] = x + step;
        EXPECT_GT(f.Evaluate(moved), at_min) << p.name << " moved by " << step;
      }
    }
  }
}

TEST(BenchFunctionsTest, StumpIsFlatInPiecesAndQuantised) {
  const std::vector<double> best = {0.0, 0.3, 0.7, 0.5, 0.5};
  EXPECT_EQ(Stump5(best), FindFunction("stump5")->f_min);
  // Near the minimiser the value does not move; x5 never moves it.
  for (double d : {-0.01, 0.01}) {
    std::vector<double> x = best;
    x[1] += d;
    EXPECT_EQ(Stump5(x), Stump5(best));
    x = best;
    x[4] = 0.5 + 40 * d;
    EXPECT_EQ(Stump5(x), Stump5(best));
  }
  // The stump: a fifth of the space at one value, better than the space's typical value.
  EXPECT_EQ(Stump5(std::vector<double>{0.81, 0.0, 0.0, 0.0, 0.0}), 0.4);
  EXPECT_EQ(Stump5(std::vector<double>{1.0, 0.3, 0.7, 0.5, 0.9}), 0.4);
  EXPECT_GT(Stump5(std::vector<double>{0.5, 0.5, 0.5, 0.5, 0.5}), 0.4);
  // Elsewhere every value is a multiple of 0.02.
  for (const Config& c : RandomConfigs(*FindFunction("stump5"), 200, 3)) {
    const double v = FindFunction("stump5")->Evaluate(c);
    EXPECT_NEAR(v / 0.02, std::round(v / 0.02), 1e-9) << v;
  }
}

// ledge2 at unit-cube coordinates (u, w) of its two log-scaled parameters.
double LedgeAt(double u, double w) {
  return Ledge2(std::pow(10.0, 4 * u - 2), std::pow(10.0, 4 * w - 2));
}

TEST(BenchFunctionsTest, LedgeHasAWidePlateauBesideAThinRidgeToANarrowBand) {
  EXPECT_NEAR(LedgeAt(0.85, 0.65), 0.014, 1e-12);  // the band
  EXPECT_NEAR(LedgeAt(0.99, 0.64), 0.014, 1e-12);
  EXPECT_NEAR(LedgeAt(0.56, 0.615), 0.021, 1e-12);  // the ridge, half way
  EXPECT_NEAR(LedgeAt(0.38, 0.0), 0.028, 1e-12);    // the plateau, whatever s is
  EXPECT_NEAR(LedgeAt(0.38, 1.0), 0.028, 1e-12);
  EXPECT_NEAR(LedgeAt(0.85, 0.70), 0.028, 1e-12);  // the strip beside the band
  EXPECT_GT(LedgeAt(0.85, 0.62), 0.028);           // the band's other side falls away
  EXPECT_GT(LedgeAt(0.85, 0.30), 0.028);
  EXPECT_GT(LedgeAt(0.05, 0.65), 0.035);
  // Every value is a multiple of 0.007.
  for (const Config& c : RandomConfigs(*FindFunction("ledge2"), 200, 3)) {
    const double v = FindFunction("ledge2")->Evaluate(c);
    EXPECT_NEAR(v / 0.007, std::round(v / 0.007), 1e-9) << v;
  }
}

TEST(BenchFunctionsTest, MixedFunctionDependsOnEveryParameterType) {
  const TestFunction& f = *FindFunction("mixed");
  // Each optimizer's best value is its offset, at its own learning rate and batch size.
  EXPECT_NEAR(Mixed(0.1, 32, "sgd", 0.25), 0.25, 1e-12);
  EXPECT_NEAR(Mixed(1e-3, 128, "adam", 0.25), 0.0, 1e-12);
  EXPECT_NEAR(Mixed(std::pow(10.0, -2.5), 512, "rmsprop", 0.25), 0.1, 1e-12);
  // The best batch of another optimizer is worse for adam; so is its best learning rate.
  EXPECT_GT(Mixed(1e-3, 512, "adam", 0.25), 0.1);
  EXPECT_GT(Mixed(0.1, 128, "adam", 0.25), 0.25);
  // A larger batch wants a larger learning rate: at batch 512, lr 1e-2 beats lr 1e-3.
  EXPECT_LT(Mixed(1e-2, 512, "adam", 0.25), Mixed(1e-3, 512, "adam", 0.25));
  // The space holds a log float, a log int (powers of two among its values) and a categorical.
  const ParamSpec* batch = f.space.Find("batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->type, ParamType::kInt);
  EXPECT_TRUE(batch->log);
  EXPECT_TRUE(f.space.Find("lr")->log);
  EXPECT_EQ(f.space.Find("optimizer")->values.size(), 3u);
}

TEST(BenchFunctionsTest, PythonDefinitionsAgreeWithTheCppOnes) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  // A JSON list of [function, configuration] pairs: each minimiser and a few random points.
  std::vector<std::pair<const TestFunction*, Config>> points;
  for (const TestFunction& f : AllFunctions()) {
    points.emplace_back(&f, f.argmin);
    for (const Config& c : RandomConfigs(f, 4, 5)) points.emplace_back(&f, c);
  }
  std::string list = "[";
  for (const auto& [f, c] : points) {
    if (list.size() > 1) list += ", ";
    list += "[\"" + f->name + "\", " + ConfigToJson(c) + "]";
  }
  list += "]";
  const std::string script =
      "import json, sys\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "import optuna_regret as m\n"
      "for name, params in json.loads(sys.argv[2]):\n"
      "    f = m.FUNCTIONS[name]\n"
      "    print(repr(f.evaluate(params)), repr(f.f_min))\n";
  hyperpack::testing::Ran ran = hyperpack::testing::RunCommand(
      {"/usr/bin/python3", "-c", script, std::string(HYPERPACK_SOURCE_DIR) + "/bench", list});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  std::istringstream lines(ran.out);
  for (const auto& [f, c] : points) {
    SCOPED_TRACE(f->name + " at " + ConfigToJson(c));
    std::string value_text, min_text;
    ASSERT_TRUE(lines >> value_text >> min_text) << ran.out;
    const double value = ParseDouble(value_text).value_or(std::nan(""));
    const double f_min = ParseDouble(min_text).value_or(std::nan(""));
    const double cpp = f->Evaluate(c);
    EXPECT_NEAR(value, cpp, 1e-12 * std::max(1.0, std::abs(cpp)));
    EXPECT_EQ(f_min, f->f_min);
  }
}

TEST(BenchFunctionsTest, PythonSpacesMatchTheCppSpaces) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 is not installed";
  const std::string script =
      "import sys\n"
      "sys.path.insert(0, sys.argv[1])\n"
      "import optuna_regret as m\n"
      "for f in m.FUNCTIONS.values():\n"
      "    for p in f.params:\n"
      "        extra = ','.join(p.choices) if p.kind == 'categorical' else "
      "'%r %r %d' % (float(p.low), float(p.high), p.log)\n"
      "        print(f.name, p.name, p.kind, extra)\n";
  hyperpack::testing::Ran ran = hyperpack::testing::RunCommand(
      {"/usr/bin/python3", "-c", script, std::string(HYPERPACK_SOURCE_DIR) + "/bench"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  std::string expected;
  for (const TestFunction& f : AllFunctions()) {
    for (const ParamSpec& p : f.space.params()) {
      expected += f.name + " " + p.name + " ";
      if (p.type == ParamType::kCategorical) {
        std::vector<std::string> values;
        for (const Value& v : p.values) values.push_back(FormatValue(v));
        expected += "categorical " + Join(values, ",");
      } else {
        auto repr = [](double x) {
          std::string s = FormatDouble(x);
          // Python's repr of a float always shows a '.' or an exponent.
          if (s.find_first_of(".e") == std::string::npos) s += ".0";
          return s;
        };
        expected += std::string(p.type == ParamType::kInt ? "int " : "float ") + repr(p.low) + " " +
                    repr(p.high) + " " + (p.log ? "1" : "0");
      }
      expected += "\n";
    }
  }
  EXPECT_EQ(ran.out, expected);
}

}  // namespace
}  // namespace hyperpack::bench
