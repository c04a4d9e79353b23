// The GP tuner on the synthetic suite's functions (bench/functions.h) where the suite guards a
// claim the unit tests cannot: stump5, flat in pieces and quantised, whose stump (a fifth of the
// space at one value, better than most of the rest) draws trials, and whose values tie everywhere.
// A rule for ties that looked right on Bayesmark's development half (the margin below a shared
// incumbent growing with the trials that tie it) held the tuner on the stump: median regret 0.16
// at 64 trials over 20 seeds, against 0 without it (docs/BENCHMARKS.md, stop 59). Like
// tuner_quality_test, it drives hundreds of proposals and is built only without the sanitizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "functions.h"
#include "hyperpack/tuner/tuner.h"
#include "tuner_drive.h"

namespace hyperpack::bench {
namespace {

// Of the tuner's seeds 0..seeds-1, how many come within `regret` of f's minimum in `evals` trials.
int SeedsReaching(const TestFunction& f, int seeds, int evals, double regret) {
  int reached = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(seeds); ++seed) {
    tuner::TunerOptions o;
    o.seed = seed;
    auto t = tuner::MakeTuner(f.space, o);
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok()) return 0;
    double best = 1e9;
    for (const Config& c : tuner::Drive(**t, evals, 1, f.evaluate))
      best = std::min(best, f.Evaluate(c));
    reached += best <= f.f_min + regret;
  }
  return reached;
}

TEST(GpTunerOnTheSuiteTest, LeavesTheStumpOfAQuantisedObjective) {
  const TestFunction* f = FindFunction("stump5");
  ASSERT_NE(f, nullptr);
  // Whether a seed leaves the stump by 64 trials is close to a coin toss for a tuner that can
  // leave it, so the bar is over 60 seeds: the tuner reaches 26 (29 before the early length-scale
  // level, 23 of 50 with and without it on seeds 10-59), and 16 with the growing margin, with or
  // without the early level. Over 10 seeds (6 against 3) the early level alone failed a bar of 5.
  const int reached = SeedsReaching(*f, 60, 64, 0.02 + 1e-9);
  EXPECT_GE(reached, 21) << reached << " of 60 seeds came within one step of the minimum";
}

}  // namespace
}  // namespace hyperpack::bench
