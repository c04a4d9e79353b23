// The GP tuner with several objectives and with constraints: a maximised objective, batches,
// a constrained quadratic, infeasible trials. Its lead over random search by hypervolume on ZDT1
// and DTLZ2 over several seeds is in tuner_quality_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/pareto.h"
#include "hyperpack/tuner/tuner.h"
#include "tuner_drive.h"

namespace hyperpack::tuner {
namespace {

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
  const double random =
      Hypervolume(DriveObjectives(TunerAlgorithm::kRandom, Zdt1, 4, 2, 30, 1, 3).values,
                  std::vector<double>{1.1, 11});
  EXPECT_GT(Hypervolume(found, std::vector<double>{1.1, 11}), random);
}

TEST(MultiObjectiveTunerTest, ABatchIsDistinctAndTheSameSeedGivesTheSameProposals) {
  auto a = DriveObjectives(TunerAlgorithm::kGp, Zdt1, 4, 2, 16, 4, 7);
  auto b = DriveObjectives(TunerAlgorithm::kGp, Zdt1, 4, 2, 16, 4, 7);
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

// Trials a pruner stopped teach it too, as they teach the one-objective tuner: the completed
// trials alone favour the left basin (the front's one point is at x = 0.1); six trials stopped
// there with bad values send the next proposal to the right one. With two objectives (hypervolume)
// and with three (ParEGO).
TEST(MultiObjectiveTunerTest, TrialsAPrunerStoppedSteerProposalsAway) {
  SearchSpace space({Float("x", 0, 1)});
  for (size_t m : {2u, 3u}) {
    auto propose = [&](bool with_stopped) {
      TunerOptions o;
      o.seed = 3;
      o.objectives.assign(m, false);
      auto tuner = MakeTuner(space, o).value();
      ObserveTwoBasins(*tuner, with_stopped, m);
      return std::get<double>(tuner->Propose(1, {}).value().at(0).at("x"));
    };
    EXPECT_LT(propose(false), 0.5) << m << " objectives: the completed trials favour the left";
    EXPECT_GT(propose(true), 0.5) << m << " objectives";
  }
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
