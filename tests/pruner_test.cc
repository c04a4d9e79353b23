// Pruners against hand-worked examples.
#include "hyperpack/tuner/pruner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace hyperpack::tuner {
namespace {

using Kind = PrunerDecision::Kind;

PrunerOptions Asha(const std::string& mode) {
  PrunerOptions o;
  o.algorithm = PrunerAlgorithm::kAsha;
  o.min_resource = 1;
  o.max_resource = 27;
  o.reduction_factor = 3;
  o.mode = mode == "promote" ? PrunerMode::kPromote : PrunerMode::kStop;
  return o;
}

TEST(PrunerTest, AshaRungsAreMinTimesEtaToTheKAndTheMaximum) {
  EXPECT_EQ(MakePruner(Asha("stop")).value()->Rungs(), (std::vector<double>{1, 3, 9, 27}));
  PrunerOptions o = Asha("stop");
  o.max_resource = 20;  // not a power of eta: the last rung is the maximum itself
  EXPECT_EQ(MakePruner(o).value()->Rungs(), (std::vector<double>{1, 3, 9, 20}));
  o.min_resource = 2;
  o.reduction_factor = 2;
  EXPECT_EQ(MakePruner(o).value()->Rungs(), (std::vector<double>{2, 4, 8, 16, 20}));
}

TEST(PrunerTest, AshaStopKeepsTheTopThirdOfEachRungSoFar) {
  auto p = MakePruner(Asha("stop")).value();
  // Rung 1 (minimise). Trial 0 is the first: it continues. Trial 1 is worse: with two values the
  // top third is still just the best, so it stops. Trial 2 is the best so far: it continues.
  for (int t : {0, 1, 2}) EXPECT_EQ(p->Begin(t), 27);
  EXPECT_EQ(p->Report(0, 1, 0.5).kind, Kind::kContinue);
  PrunerDecision d = p->Report(1, 1, 0.7);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("ranks 2 of 2"), std::string::npos) << d.reason;
  EXPECT_EQ(p->Report(2, 1, 0.4).kind, Kind::kContinue);
  // Six values at rung 1: the top two continue. A value between the 2nd and 3rd best stops.
  EXPECT_EQ(p->Report(3, 1, 0.9).kind, Kind::kStop);
  EXPECT_EQ(p->Report(4, 1, 0.8).kind, Kind::kStop);
  EXPECT_EQ(p->Report(5, 1, 0.45).kind, Kind::kContinue);  // 2nd of 6: top 2
  EXPECT_EQ(p->Report(6, 1, 0.47).kind, Kind::kStop);      // 3rd of 7: top 2
  // Between rungs nothing is decided; at rung 3 trial 0 is alone and continues.
  EXPECT_EQ(p->Report(0, 2, 0.1).kind, Kind::kContinue);
  EXPECT_EQ(p->Report(0, 3, 0.3).kind, Kind::kContinue);
  // A report that jumps past several rungs records each of them.
  EXPECT_EQ(p->Report(2, 9, 0.2).kind, Kind::kContinue);
}

TEST(PrunerTest, AshaPromoteMovesPausedTrialsUpInTheOrderOfTheirRanks) {
  auto p = MakePruner(Asha("promote")).value();
  ASSERT_TRUE(p->pauses());
  // Every new trial trains to rung 1 and pauses there.
  for (int t = 0; t < 6; ++t) EXPECT_EQ(p->Begin(t), 1);
  const double values[] = {0.6, 0.3, 0.9, 0.5, 0.2, 0.8};
  EXPECT_EQ(p->Report(0, 1, values[0]).kind, Kind::kPause);
  EXPECT_FALSE(p->NextPromotion());  // 1 value: floor(1/3) = 0 may go up
  EXPECT_EQ(p->Report(1, 1, values[1]).kind, Kind::kPause);
  EXPECT_EQ(p->Report(2, 1, values[2]).kind, Kind::kPause);
  // 3 values: the best (trial 1, 0.3) goes to rung 3.
  auto up = p->NextPromotion();
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 1);
  EXPECT_EQ(up->target, 3);
  EXPECT_FALSE(p->NextPromotion());
  EXPECT_EQ(p->Begin(1), 3);
  for (int t : {3, 4, 5}) EXPECT_EQ(p->Report(t, 1, values[t]).kind, Kind::kPause);
  // 6 values: the top 2 are trials 4 (0.2) and 1 (0.3); 1 was promoted already, so 4 goes.
  up = p->NextPromotion();
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 4);
  EXPECT_FALSE(p->NextPromotion());
  // At rung 3 trial 1 pauses again; trial 4 reaches it later; 2 values: nothing goes to 9.
  EXPECT_EQ(p->Report(1, 3, 0.25).kind, Kind::kPause);
  EXPECT_EQ(p->Report(4, 3, 0.15).kind, Kind::kPause);
  EXPECT_FALSE(p->NextPromotion());
  // A trial that ended (stopped by the user) is never promoted.
  p->End(0, false);
}

TEST(PrunerTest, AHigherRungIsPromotedFromFirst) {
  auto p = MakePruner(Asha("promote")).value();
  for (int t = 0; t < 9; ++t) {
    p->Begin(t);
    p->Report(t, 1, 0.1 * (t + 1));
  }
  // Top 3 of 9 at rung 1: trials 0, 1, 2, in that order.
  for (int t : {0, 1, 2}) {
    auto up = p->NextPromotion();
    ASSERT_TRUE(up);
    EXPECT_EQ(up->trial, t);
    p->Begin(t);
    p->Report(t, 3, 0.05 * (t + 1));
  }
  // Now rung 3 holds 3 values, and its best (trial 0) goes to 9 before anything else.
  auto up = p->NextPromotion();
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 0);
  EXPECT_EQ(up->target, 9);
}

TEST(PrunerTest, HyperbandSpreadsTrialsOverBracketsWithLargerMinimums) {
  PrunerOptions o = Asha("promote");
  o.algorithm = PrunerAlgorithm::kHyperband;
  auto p = MakePruner(o).value();
  // Brackets start at 1, 3, 9 and 27; new trials go to them in turn.
  EXPECT_EQ(p->Begin(0), 1);
  EXPECT_EQ(p->Begin(1), 3);
  EXPECT_EQ(p->Begin(2), 9);
  EXPECT_EQ(p->Begin(3), 27);
  EXPECT_EQ(p->Begin(4), 1);
}

TEST(PrunerTest, MedianStopsATrialWorseThanTheMedianOfCompletedOnesAtTheSameStep) {
  PrunerOptions o;
  o.algorithm = PrunerAlgorithm::kMedian;
  o.startup_trials = 3;
  o.warmup_steps = 2;
  auto p = MakePruner(o).value();
  // Three completed trials with values at steps 1..5.
  for (int t = 0; t < 3; ++t) {
    for (int s = 1; s <= 5; ++s)
      EXPECT_EQ(p->Report(t, s, (t + 1) * 1.0 / s).kind, Kind::kContinue);
    p->End(t, true);
  }
  // At step 4 the completed values are 0.25, 0.5, 0.75: median 0.5.
  EXPECT_EQ(p->Report(3, 1, 5.0).kind, Kind::kContinue);  // warm-up
  EXPECT_EQ(p->Report(3, 4, 0.45).kind, Kind::kContinue);
  PrunerDecision d = p->Report(4, 4, 0.6);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("median 0.5"), std::string::npos) << d.reason;
  // Its best so far counts: a trial that was at 0.3 earlier is not stopped at 0.6.
  EXPECT_EQ(p->Report(5, 3, 0.3).kind, Kind::kContinue);
  EXPECT_EQ(p->Report(5, 4, 0.6).kind, Kind::kContinue);
}

TEST(PrunerTest, MedianNeverStopsATrialAtItsLastReport) {
  PrunerOptions o;
  o.algorithm = PrunerAlgorithm::kMedian;
  o.startup_trials = 1;
  o.max_resource = 5;
  auto p = MakePruner(o).value();
  for (int s = 1; s <= 5; ++s) p->Report(0, s, 1.0 / s);
  p->End(0, true);
  EXPECT_EQ(p->Report(1, 4, 2.0).kind, Kind::kStop);
  EXPECT_EQ(p->Report(2, 5, 2.0).kind, Kind::kContinue) << "trained to the end: nothing to save";
}

TEST(PrunerTest, MedianWaitsForItsStartupTrialsAndMaximisationFlipsIt) {
  PrunerOptions o;
  o.algorithm = PrunerAlgorithm::kMedian;
  o.startup_trials = 2;
  o.maximize = true;
  auto p = MakePruner(o).value();
  p->Report(0, 1, 0.9);
  EXPECT_EQ(p->Report(1, 1, 0.1).kind, Kind::kContinue);  // nothing completed yet
  p->End(0, true);
  p->End(1, true);
  EXPECT_EQ(p->Report(2, 1, 0.2).kind, Kind::kStop);  // median 0.5, maximising
  EXPECT_EQ(p->Report(3, 1, 0.8).kind, Kind::kContinue);
}

TEST(PrunerTest, BadOptionsAreErrors) {
  EXPECT_FALSE(ParsePrunerMode("sometimes").ok());
  PrunerOptions o = Asha("stop");
  o.max_resource = 0.5;
  EXPECT_FALSE(MakePruner(o).ok());
  o = Asha("stop");
  o.reduction_factor = 1;
  EXPECT_FALSE(MakePruner(o).ok());
  EXPECT_FALSE(ParsePrunerAlgorithm("successive").ok());
  o = PrunerOptions();
  auto none = MakePruner(o).value();
  EXPECT_EQ(none->Report(0, 100, 1e9).kind, Kind::kContinue);
}

// Rungs 1, 3, 9.
PrunerOptions Promote() {
  PrunerOptions o = Asha("promote");
  o.max_resource = 9;
  return o;
}

TEST(PrunerTest, EachReportAtARungSaysWhichRung) {
  PrunerOptions o = Promote();
  o.mode = PrunerMode::kStop;
  auto p = MakePruner(o).value();
  p->Begin(0);
  EXPECT_EQ(p->Report(0, 1, 0.5).rung, 1);
  EXPECT_FALSE(p->Report(0, 2, 0.4).rung);
  // Jumping past rung 3 to 5 records rung 3; the maximum is a rung too.
  EXPECT_EQ(p->Report(0, 5, 0.3).rung, 3);
  EXPECT_EQ(p->Report(0, 9, 0.2).rung, 9);
  // A stop comes with its rung as well.
  p->Begin(1);
  PrunerDecision d = p->Report(1, 1, 0.9);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_EQ(d.rung, 1);
}

TEST(PrunerTest, ATrialThatCannotPauseIsJudgedAsInStopMode) {
  auto p = MakePruner(Promote()).value();
  for (int t : {0, 1, 2}) EXPECT_EQ(p->Begin(t), 1);
  EXPECT_EQ(p->Report(0, 1, 0.5).kind, Kind::kPause);
  EXPECT_EQ(p->Report(1, 1, 0.3).kind, Kind::kPause);
  // Trial 1 had no checkpoint: as the best of two it continues, and is never a promotion.
  EXPECT_EQ(p->CannotPause(1).kind, Kind::kContinue);
  EXPECT_EQ(p->Begin(1), 9);
  // Trial 2 (third of three) cannot pause either, and stops.
  EXPECT_EQ(p->Report(2, 1, 0.7).kind, Kind::kPause);
  PrunerDecision d = p->CannotPause(2);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("cannot pause"), std::string::npos) << d.reason;
  // Three values at rung 1: the top one is trial 1, which runs on; trial 0 is 2nd: nothing.
  EXPECT_FALSE(p->NextPromotion());
  // At rung 3 trial 1 is judged, not paused.
  EXPECT_EQ(p->Report(1, 3, 0.2).kind, Kind::kContinue);
}

TEST(PrunerTest, APromotionReplayedAfterACrashIsNotMadeTwice) {
  auto p = MakePruner(Promote()).value();
  for (int t : {0, 1, 2}) {
    p->Begin(t);
    p->Report(t, 1, 0.1 * (t + 1));
  }
  // Replaying: trial 0 reported past rung 1, so it had been promoted.
  p->Promoted(0);
  EXPECT_EQ(p->Begin(0), 3);
  EXPECT_FALSE(p->NextPromotion());
}

TEST(PrunerTest, AForcedPromotionTakesTheBestPausedTrialAtTheHighestRung) {
  auto p = MakePruner(Promote()).value();
  EXPECT_FALSE(p->ForcePromotion());
  for (int t : {0, 1, 2, 3}) {
    p->Begin(t);
    p->Report(t, 1, 0.1 * (t + 1));
  }
  auto up = p->NextPromotion();  // top 1 of 4 at rung 1: trial 0
  ASSERT_TRUE(up);
  EXPECT_EQ(p->Report(0, 3, 0.05).kind, PrunerDecision::Kind::kPause);
  // Trial 0 alone at rung 3 is not in its top third, but it is the highest: it is forced on.
  EXPECT_FALSE(p->NextPromotion());
  up = p->ForcePromotion();
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 0);
  EXPECT_EQ(up->target, 9);
  // Next: the best paused at rung 1 (trial 1, 0.2).
  up = p->ForcePromotion();
  ASSERT_TRUE(up);
  EXPECT_EQ(up->trial, 1);
  EXPECT_EQ(up->target, 3);
}

TEST(PrunerTest, PromotionsTakeTheTopNOverEtaForARealEta) {
  PrunerOptions o = Asha("promote");
  o.max_resource = 100;
  o.reduction_factor = 2.5;
  auto p = MakePruner(o).value();
  for (int t = 0; t < 10; ++t) {
    p->Begin(t);
    p->Report(t, 1, t);
  }
  int promoted = 0;
  while (p->NextPromotion()) ++promoted;
  EXPECT_EQ(promoted, 4);  // floor(10 / 2.5)
}

// ---- several objectives ------------------------------------------------------------------------

PrunerOptions TwoObjectiveAsha(const std::string& mode) {
  PrunerOptions o = Asha(mode);
  o.reduction_factor = 2;
  o.max_resource = 4;  // rungs 1, 2, 4
  o.objectives = {false, false};
  return o;
}

std::vector<double> V(double a, double b) { return {a, b}; }

// A rung ranks by non-dominated front: a trial that another dominates is stopped, one that
// dominates the rest continues, and the reason says which front a stopped trial is in.
TEST(PrunerTest, WithTwoObjectivesAStopRankStopsADominatedTrialAndKeepsADominatingOne) {
  auto p = MakePruner(TwoObjectiveAsha("stop")).value();
  for (int t = 0; t < 5; ++t) p->Begin(t);
  EXPECT_EQ(p->ReportObjectives(0, 1, V(1, 4)).kind, Kind::kContinue);
  EXPECT_EQ(p->ReportObjectives(1, 1, V(4, 1)).kind, Kind::kStop);  // the top 1 of 2 is trial 0
  EXPECT_EQ(p->ReportObjectives(2, 1, V(2, 2)).kind, Kind::kStop);
  // Dominated by trial 2, though its first objective is better than trial 1's.
  PrunerDecision d = p->ReportObjectives(3, 1, V(3, 3));
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("(3, 3) at rung 1 is in non-dominated front 2 of 2"), std::string::npos)
      << d.reason;
  // Dominates every other: first of the 5, within the top 2.
  EXPECT_EQ(p->ReportObjectives(4, 1, V(0.5, 0.5)).kind, Kind::kContinue);
}

// Promote mode: the top half of the rung by front and crowding is promoted, the extremes of the
// front first; a dominated trial is not, though ranking by the first objective alone would promote
// it ahead of one of them.
TEST(PrunerTest, WithTwoObjectivesPromotionsComeFromTheFrontAndNotFromADominatedTrial) {
  auto p = MakePruner(TwoObjectiveAsha("promote")).value();
  const std::vector<std::vector<double>> at_rung = {V(1, 4), V(4, 1), V(2, 2), V(3, 3)};
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(p->Begin(t), 1);
    EXPECT_EQ(p->ReportObjectives(t, 1, at_rung[t]).kind, Kind::kPause);
  }
  std::vector<int> promoted;
  while (auto next = p->NextPromotion()) {
    EXPECT_EQ(next->target, 2);
    promoted.push_back(next->trial);
  }
  EXPECT_EQ(promoted, (std::vector<int>{0, 1}));
  // One objective (the first alone) would have promoted trials 0 and 2.
  PrunerOptions one = TwoObjectiveAsha("promote");
  one.objectives.clear();
  auto q = MakePruner(one).value();
  for (int t = 0; t < 4; ++t) {
    q->Begin(t);
    q->Report(t, 1, at_rung[t][0]);
  }
  EXPECT_EQ(q->NextPromotion()->trial, 0);
  EXPECT_EQ(q->NextPromotion()->trial, 2);
}

TEST(PrunerTest, WithTwoObjectivesAMissingValueRanksLast) {
  auto p = MakePruner(TwoObjectiveAsha("promote")).value();
  const double nan = std::nan("");
  for (int t = 0; t < 4; ++t) p->Begin(t);
  p->ReportObjectives(0, 1, V(0.1, nan));  // would lead on the first objective
  p->ReportObjectives(1, 1, V(1, 1));
  p->ReportObjectives(2, 1, V(2, 2));
  p->ReportObjectives(3, 1, V(3, 3));
  EXPECT_EQ(p->NextPromotion()->trial, 1);
  EXPECT_EQ(p->NextPromotion()->trial, 2);
  EXPECT_FALSE(p->NextPromotion());
  // Forced, the best placed paused trial at the highest rung goes: trial 3 beats trial 0.
  EXPECT_EQ(p->ForcePromotion()->trial, 3);
}

// The forecast pruner with rungs at 1, 3 and 9 of 27 epochs, and `completed` trials that reported
// `first[i]` after one epoch and `last[i]` at the end (values flipped in sign when maximising).
std::unique_ptr<Pruner> Forecast(const std::vector<double>& first, const std::vector<double>& last,
                                 bool maximize = false) {
  PrunerOptions o = Asha("stop");
  o.algorithm = PrunerAlgorithm::kForecast;
  o.maximize = maximize;
  const double sign = maximize ? -1 : 1;
  auto p = MakePruner(o).value();
  for (size_t t = 0; t < first.size(); ++t) {
    p->Report(static_cast<int>(t), 1, sign * first[t]);
    p->Report(static_cast<int>(t), 27, sign * last[t]);
    p->End(static_cast<int>(t), true);
  }
  return p;
}

// Five completed trials whose final error is half their first epoch's, give or take 0.005.
const std::vector<double> kFirst = {0.5, 0.6, 0.7, 0.8, 0.9};
const std::vector<double> kLast = {0.255, 0.295, 0.355, 0.395, 0.455};

TEST(PrunerTest, ForecastStopsATrialTheCompletedOnesSayCannotEndBest) {
  auto p = Forecast(kFirst, kLast);
  PrunerDecision d = p->Report(10, 1, 0.75);  // forecast about 0.375, best 0.255
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("forecast: 0.75 at rung 1"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("from 5 completed trials"), std::string::npos) << d.reason;
  // Better than the completed trials' median after one epoch: never stopped, whatever the line.
  EXPECT_EQ(p->Report(11, 1, 0.65).kind, Kind::kContinue);
  // Just worse than the median: the line is tight, and 0.705 forecasts about 0.355.
  EXPECT_EQ(p->Report(12, 1, 0.705).kind, Kind::kStop);
}

TEST(PrunerTest, ForecastSetsAsideTrialsThatDivergedAfterTheRung) {
  // The five trials above and two that diverged after a good first epoch: a line through all
  // seven would have so wide an error that the trial would go on.
  std::vector<double> first = kFirst, last = kLast;
  first.insert(first.end(), {0.55, 0.65});
  last.insert(last.end(), {2.3, 2.3});
  auto p = Forecast(first, last);
  PrunerDecision d = p->Report(10, 1, 0.75);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("from 7 completed trials (2 off the line set aside)"), std::string::npos)
      << d.reason;
  // Two slow starters that ended far better than their first epoch promised are the evidence that
  // the rung says little, not set aside (set aside, the chance would be nil): 0.9 goes on.
  first = kFirst;
  last = kLast;
  first.insert(first.end(), {0.85, 0.95});
  last.insert(last.end(), {0.1, 0.11});
  EXPECT_EQ(Forecast(first, last)->Report(10, 1, 0.9).kind, Kind::kContinue);
}

TEST(PrunerTest, ForecastLeavesTrialsThatEndedWithoutAFiniteValueOffItsLine) {
  // Two more completed trials whose loss became NaN, which the controller ranks worst (infinity):
  // on no line, they neither stop nor shield the trial the other five judge.
  const double worst = std::numeric_limits<double>::infinity();
  std::vector<double> first = kFirst, last = kLast;
  first.insert(first.end(), {0.55, worst});
  last.insert(last.end(), {worst, worst});
  auto p = Forecast(first, last);
  PrunerDecision d = p->Report(10, 1, 0.75);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("from 5 completed trials;"), std::string::npos) << d.reason;
  EXPECT_EQ(p->Report(11, 1, 0.65).kind, Kind::kContinue);
}

TEST(PrunerTest, ForecastKeepsASlowStarterWhenTheFirstEpochSaysLittle) {
  // The same first epochs, and final values that do not follow them: a trial worse than every
  // completed one after an epoch (which ASHA and the median would stop) may still end best.
  auto p = Forecast(kFirst, {0.3, 0.2, 0.35, 0.25, 0.3});
  EXPECT_EQ(p->Report(10, 1, 0.95).kind, Kind::kContinue);
  auto median = Asha("stop");
  median.algorithm = PrunerAlgorithm::kMedian;
  auto m = MakePruner(median).value();
  for (int t = 0; t < 5; ++t) {
    m->Report(t, 1, kFirst[t]);
    m->End(t, true);
  }
  EXPECT_EQ(m->Report(10, 1, 0.95).kind, Kind::kStop) << "the median would have stopped it";
}

TEST(PrunerTest, ForecastJudgesAtRungsOnlyOnceItsStartupTrialsHaveCompleted) {
  // Four completed trials are fewer than startup_trials (5): no judgement yet.
  auto early = Forecast({0.5, 0.6, 0.7, 0.8}, {0.255, 0.295, 0.355, 0.395});
  EXPECT_EQ(early->Report(10, 1, 2.0).kind, Kind::kContinue);
  auto p = Forecast(kFirst, kLast);
  // Before the first rung, nothing is judged; at it, the trial is.
  EXPECT_EQ(p->Report(10, 0.5, 2.0).kind, Kind::kContinue);
  EXPECT_EQ(p->Report(10, 1, 2.0).kind, Kind::kStop);
  // The first report at or past a rung is judged there (rungs 1 and 3 passed at once: once).
  EXPECT_EQ(p->Report(11, 4, 2.0).kind, Kind::kStop);
  // Between rungs nothing is judged; at a rung the best value so far counts, as the median's.
  EXPECT_EQ(p->Report(12, 1, 0.5).kind, Kind::kContinue);
  EXPECT_EQ(p->Report(12, 2, 2.0).kind, Kind::kContinue);
  EXPECT_EQ(p->Report(12, 3, 2.0).kind, Kind::kContinue);
  // The last report saves nothing: never stopped.
  EXPECT_EQ(p->Report(12, 27, 2.0).kind, Kind::kContinue);
}

TEST(PrunerTest, BeforeItsLineTheForecastStopsTheWorseHalfFromTheSecondRungOn) {
  PrunerOptions o = Asha("stop");
  o.algorithm = PrunerAlgorithm::kForecast;
  auto p = MakePruner(o).value();
  // Eight trials at once, none completed. The first rung judges nothing, however bad.
  for (int t = 0; t < 8; ++t) EXPECT_EQ(p->Report(t, 1, t == 7 ? 5.0 : 0.5).kind, Kind::kContinue);
  // At the second rung (3 epochs): three trials are too few for a median.
  for (int t = 0; t < 3; ++t) EXPECT_EQ(p->Report(t, 3, 0.4 + 0.1 * t).kind, Kind::kContinue);
  // The fourth makes a median of 0.45 (0.4, 0.5, 0.6, and its own 0.3): 0.6's trial would now stop,
  // but it was judged when it arrived; a later arrival worse than the median stops (its best so
  // far counts: 0.7, after 5.0 at the first rung).
  EXPECT_EQ(p->Report(3, 3, 0.3).kind, Kind::kContinue);
  PrunerDecision d = p->Report(7, 3, 0.7);
  EXPECT_EQ(d.kind, Kind::kStop);
  EXPECT_NE(d.reason.find("before 5 trials have completed: 0.7 at rung 3 is worse than the "
                          "median, 0.5, of the 5 trials that reached it"),
            std::string::npos)
      << d.reason;
  EXPECT_EQ(p->Report(5, 4, 0.45).kind, Kind::kContinue) << "better than the median (0.475)";
  // Once the startup trials have completed, the line judges instead: the same trial would go on
  // (a line whose final values do not follow the rung).
  auto q = Forecast(kFirst, {0.3, 0.2, 0.35, 0.25, 0.3});
  for (int t = 10; t < 14; ++t) q->Report(t, 3, 0.1);
  EXPECT_EQ(q->Report(14, 3, 0.95).kind, Kind::kContinue);
}

TEST(PrunerTest, ForecastMaximisesWhenTheStudyDoes) {
  // The same curves flipped in sign and maximised: the same decisions.
  auto p = Forecast(kFirst, kLast, /*maximize=*/true);
  EXPECT_EQ(p->Report(10, 1, -2.0).kind, Kind::kStop);
  EXPECT_EQ(p->Report(11, 1, -0.55).kind, Kind::kContinue);
  PrunerOptions o = Asha("stop");
  o.algorithm = PrunerAlgorithm::kForecast;
  for (double bad : {0.0, 1.0, -0.5, std::nan("")}) {
    o.probability = bad;
    EXPECT_FALSE(MakePruner(o).ok()) << bad;
  }
}

}  // namespace
}  // namespace hyperpack::tuner
