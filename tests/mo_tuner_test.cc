// The GP tuner with several objectives and with constraints, driven on standard problems (ZDT1,
// DTLZ2, a constrained quadratic) and judged by the exact hypervolume of what it found against
// random search on the same budget and seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/pareto.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::tuner {
namespace {

using Problem = std::function<std::vector<double>(const std::vector<double>& x)>;

SearchSpace UnitCube(int dims) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < dims; ++i) {
    ParamSpec p;
    p.name = "x" + std::to_string(i);
    p.type = ParamType::kFloat;
    p.low = 0;
    p.high = 1;
    params.push_back(p);
  }
  return SearchSpace(params);
}

std::vector<double> Coordinates(const Config& c, int dims) {
  std::vector<double> x;
  for (int i = 0; i < dims; ++i) x.push_back(std::get<double>(c.at("x" + std::to_string(i))));
  return x;
}

// ZDT1 (Zitzler, Deb and Thiele 2000): a convex front f2 = 1 - sqrt(f1) where x1.. are 0.
std::vector<double> Zdt1(const std::vector<double>& x) {
  double g = 0;
  for (size_t i = 1; i < x.size(); ++i) g += x[i];
  g = 1 + 9 * g / static_cast<double>(x.size() - 1);
  return {x[0], g * (1 - std::sqrt(x[0] / g))};
}

// DTLZ2 with m objectives (Deb et al. 2002): the front is the positive part of the unit sphere,
// reached where the last variables are 0.5.
std::vector<double> Dtlz2Of(const std::vector<double>& x, int m) {
  double g = 0;
  for (size_t i = m - 1; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
  std::vector<double> f(m, 1 + g);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m - 1 - i; ++j) f[i] *= std::cos(x[j] * std::numbers::pi / 2);
    if (i > 0) f[i] *= std::sin(x[m - 1 - i] * std::numbers::pi / 2);
  }
  return f;
}
std::vector<double> Dtlz2(const std::vector<double>& x) { return Dtlz2Of(x, 3); }
std::vector<double> Dtlz2Four(const std::vector<double>& x) { return Dtlz2Of(x, 4); }

struct Run {
  std::vector<std::vector<double>> values;  // every trial's objectives, in order
  std::vector<Config> configs;
};

// Drives a tuner for `evals` trials, `batch` at a time, on `f` (its objectives, all minimised).
Run Drive(TunerAlgorithm algorithm, const Problem& f, int dims, int objectives, int evals,
          int batch, uint64_t seed) {
  TunerOptions o;
  o.algorithm = algorithm;
  o.seed = seed;
  o.objectives.assign(objectives, false);
  auto tuner = MakeTuner(UnitCube(dims), o);
  EXPECT_TRUE(tuner.ok()) << tuner.status().message();
  Run run;
  while (static_cast<int>(run.values.size()) < evals) {
    auto cs = (*tuner)->Propose(batch, {});
    EXPECT_TRUE(cs.ok()) << cs.status().message();
    if (!cs.ok() || cs->empty()) break;
    for (const Config& c : *cs) {
      TrialOutcome out;
      out.config = c;
      out.values = f(Coordinates(c, dims));
      out.value = out.values[0];
      (*tuner)->Observe(out);
      run.values.push_back(out.values);
      run.configs.push_back(c);
    }
  }
  return run;
}

// How many of `seeds` seeds the GP's hypervolume beats random search's on the same budget.
int SeedsAheadOfRandom(const Problem& f, int dims, int objectives, int evals, int batch,
                       const std::vector<double>& ref, int seeds) {
  int ahead = 0;
  for (int s = 0; s < seeds; ++s) {
    const double gp =
        Hypervolume(Drive(TunerAlgorithm::kGp, f, dims, objectives, evals, batch, s).values, ref);
    const double random = Hypervolume(
        Drive(TunerAlgorithm::kRandom, f, dims, objectives, evals, batch, s).values, ref);
    ahead += gp > random;
  }
  return ahead;
}

TEST(MultiObjectiveTunerTest, ItsFrontOnZdt1HasMoreHypervolumeThanRandomSearchsOnEverySeed) {
  EXPECT_EQ(SeedsAheadOfRandom(Zdt1, 4, 2, 30, 1, {1.1, 11}, 4), 4);
}

TEST(MultiObjectiveTunerTest, InBatchesOfFourItStillLeadsRandomSearchOnZdt1) {
  EXPECT_EQ(SeedsAheadOfRandom(Zdt1, 4, 2, 32, 4, {1.1, 11}, 3), 3);
}

// Three objectives: ParEGO's random scalarisations.
TEST(MultiObjectiveTunerTest, WithThreeObjectivesParEgoLeadsRandomSearchOnDtlz2) {
  EXPECT_EQ(SeedsAheadOfRandom(Dtlz2, 5, 3, 40, 1, {2.2, 2.2, 2.2}, 3), 3);
}

// And four.
TEST(MultiObjectiveTunerTest, WithFourObjectivesParEgoLeadsRandomSearchOnDtlz2) {
  EXPECT_EQ(SeedsAheadOfRandom(Dtlz2Four, 6, 4, 40, 1, {2.2, 2.2, 2.2, 2.2}, 3), 3);
}

TEST(MultiObjectiveTunerTest, AMaximisedObjectiveIsSoughtUpwards) {
  // ZDT1 with its second objective negated and declared maximised: the same problem.
  auto negated = [](const std::vector<double>& x) {
    std::vector<double> v = Zdt1(x);
    v[1] = -v[1];
    return v;
  };
  TunerOptions o;
  o.seed = 3;
  o.objectives = {false, true};
  auto tuner = MakeTuner(UnitCube(4), o).value();
  std::vector<std::vector<double>> found;
  for (int i = 0; i < 30; ++i) {
    Config c = tuner->Propose(1, {}).value().at(0);
    TrialOutcome out;
    out.config = c;
    out.values = negated(Coordinates(c, 4));
    tuner->Observe(out);
    found.push_back({out.values[0], -out.values[1]});
  }
  const double random = Hypervolume(Drive(TunerAlgorithm::kRandom, Zdt1, 4, 2, 30, 1, 3).values,
                                    std::vector<double>{1.1, 11});
  EXPECT_GT(Hypervolume(found, std::vector<double>{1.1, 11}), random);
}

TEST(MultiObjectiveTunerTest, ABatchIsDistinctAndTheSameSeedGivesTheSameProposals) {
  auto a = Drive(TunerAlgorithm::kGp, Zdt1, 4, 2, 16, 4, 7);
  auto b = Drive(TunerAlgorithm::kGp, Zdt1, 4, 2, 16, 4, 7);
  ASSERT_EQ(a.configs.size(), 16u);
  EXPECT_EQ(a.configs, b.configs);
  for (size_t i = 0; i < a.configs.size(); ++i)
    for (size_t j = 0; j < i; ++j) EXPECT_FALSE(SameConfig(a.configs[i], a.configs[j]));
}

// Minimise (x0 - 0.9)^2 + (x1 - 0.9)^2 subject to x0 + x1 <= 1: the best feasible point is
// (0.5, 0.5), value 0.32, on the constraint's edge; most of the square around the unconstrained
// minimum is infeasible.
TEST(MultiObjectiveTunerTest, OneObjectiveWithAConstraintFindsTheBestFeasiblePointOnItsEdge) {
  int near = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    TunerOptions o;
    o.seed = seed;
    o.constraints = 1;
    auto tuner = MakeTuner(UnitCube(2), o).value();
    double best = std::numeric_limits<double>::infinity();
    int feasible_after_design = 0;
    for (int i = 0; i < 30; ++i) {
      Config c = tuner->Propose(1, {}).value().at(0);
      const std::vector<double> x = Coordinates(c, 2);
      TrialOutcome out;
      out.config = c;
      out.value = (x[0] - 0.9) * (x[0] - 0.9) + (x[1] - 0.9) * (x[1] - 0.9);
      out.violations = {x[0] + x[1] - 1};
      tuner->Observe(out);
      if (out.violations[0] <= 0) {
        best = std::min(best, *out.value);
        feasible_after_design += i >= 10;
      }
    }
    near += best < 0.33;
    // It learns where the constraint holds: most proposals after the first ten are feasible.
    EXPECT_GE(feasible_after_design, 12) << "seed " << seed;
  }
  EXPECT_EQ(near, 3);
}

// Trials that cannot run (exit 3: infeasible) teach it where not to propose, as they teach the
// one-objective tuner: here every configuration with x0 > 0.6 is infeasible.
TEST(MultiObjectiveTunerTest, InfeasibleTrialsSteerProposalsAway) {
  int infeasible_late = 0, late = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    TunerOptions o;
    o.seed = seed;
    o.objectives = {false, false};
    auto tuner = MakeTuner(UnitCube(4), o).value();
    for (int i = 0; i < 30; ++i) {
      Config c = tuner->Propose(1, {}).value().at(0);
      const std::vector<double> x = Coordinates(c, 4);
      TrialOutcome out;
      out.config = c;
      if (x[0] > 0.6) {
        out.kind = TrialOutcome::Kind::kInfeasible;
      } else {
        out.values = Zdt1(x);
        out.value = out.values[0];
      }
      tuner->Observe(out);
      if (i >= 10) {
        ++late;
        infeasible_late += x[0] > 0.6;
      }
    }
  }
  // Uniform proposals would be infeasible 40% of the time.
  EXPECT_LT(infeasible_late, late / 10) << infeasible_late << " of " << late;
}

TEST(MultiObjectiveTunerTest, RefusesOneObjectiveListedAloneOrMoreThanFour) {
  TunerOptions o;
  o.objectives = {false};
  EXPECT_FALSE(MakeTuner(UnitCube(2), o).ok());
  o.objectives.assign(5, false);
  EXPECT_FALSE(MakeTuner(UnitCube(2), o).ok());
}

}  // namespace
}  // namespace hyperpack::tuner
