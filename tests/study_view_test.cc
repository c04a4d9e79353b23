// The summary view (ReadStudySummary: a tally, the open trials and the best ones) against the full
// view (ReadStudyView) of the same stored study: what `status`, `best` and `status --watch` derive
// from them must agree.
#include "study_view.h"

#include <gtest/gtest.h>

#include <random>

#include "costs.h"
#include "hyperpack/report/report.h"
#include "hyperpack/storage/storage.h"
#include "study_text.h"

namespace hyperpack::report {
namespace {

using storage::TrialRecord;
using storage::TrialState;

constexpr char kSpec[] = R"(name: s
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
trial: {command: "true"}
budget: {max_trials: 1000}
)";

// 400 trials of every state: values on a coarse grid (so that many tie), costs that vary, some
// trials paused and resumed.
std::unique_ptr<storage::Storage> Study(Direction direction) {
  auto db = storage::OpenStorage("memory:").value();
  storage::StudyRecord s;
  s.name = "s";
  s.spec_text = kSpec;
  s.direction = direction;
  s.metric = "loss";
  s = db->CreateStudy(s).value();
  std::mt19937 rng(7);
  const TrialState kStates[] = {TrialState::kCompleted, TrialState::kCompleted,
                                TrialState::kCompleted, TrialState::kPruned,
                                TrialState::kFailed,    TrialState::kPaused};
  for (int n = 0; n < 400; ++n) {
    TrialRecord t;
    t.study_id = s.id;
    t.number = n;
    t.params = {{"x", (n % 97) / 97.0}};
    t.started = 1000.0 + n;
    t.placement = {{"h", {}, 1 + n % 3}};
    EXPECT_TRUE(db->InsertTrial(t).ok());
    if (n >= 396) continue;  // running
    t.state = kStates[rng() % 6];
    if (t.state != TrialState::kFailed) t.value = 0.5 + (rng() % 40) / 100.0;
    t.ended = *t.started + 1 + rng() % 50;
    EXPECT_TRUE(db->FinishTrial(t).ok());
    if (n % 7 == 0) EXPECT_TRUE(db->AddEvent(s.id, {*t.started + 0.5, n, "trial_paused", ""}).ok());
  }
  return db;
}

TEST(StudySummaryTest, SaysWhatTheFullViewSays) {
  for (Direction direction : {Direction::kMinimize, Direction::kMaximize}) {
    auto db = Study(direction);
    for (Tolerance within : {Tolerance{}, Tolerance{0.01, true}, Tolerance{0.1, false}}) {
      StudyView full = ReadStudyView(*db, "s", ViewParts::kCosts).value();
      StudyView summary = ReadStudySummary(*db, "s", within).value();
      summary.now = full.now;
      EXPECT_EQ(Tally(summary), Tally(full));
      EXPECT_EQ(StudyElapsed(summary), StudyElapsed(full));
      EXPECT_EQ(RunnerStateOf(summary), RunnerStateOf(full));
      EXPECT_LT(summary.trials.size(), full.trials.size() / 2);
      int open = 0;
      for (const TrialRecord& t : summary.trials)
        open += t.state == TrialState::kRunning || t.state == TrialState::kPaused;
      EXPECT_EQ(open,
                Tally(full).counts[TrialState::kRunning] + Tally(full).counts[TrialState::kPaused]);
      const auto ranked_full = Ranked(full), ranked = Ranked(summary);
      ASSERT_FALSE(ranked.empty());
      EXPECT_EQ(ranked.front()->number, ranked_full.front()->number);
      const TrialRecord* cheap =
          CheapestWithin(ranked, TrialCosts(summary), within, direction == Direction::kMaximize);
      const TrialRecord* cheap_full =
          CheapestWithin(ranked_full, TrialCosts(full), within, direction == Direction::kMaximize);
      EXPECT_EQ(cheap->number, cheap_full->number) << within.amount;
      EXPECT_EQ(TrialCosts(summary).at(cheap->number).cost,
                TrialCosts(full).at(cheap->number).cost);
    }
  }
}

TEST(StudySummaryTest, AStudyWithoutTrialsAndOneNotThere) {
  auto db = storage::OpenStorage("memory:").value();
  storage::StudyRecord s;
  s.name = "empty";
  s.spec_text = kSpec;
  ASSERT_TRUE(db->CreateStudy(s).ok());
  StudyView v = ReadStudySummary(*db, "empty", Tolerance{}).value();
  EXPECT_TRUE(v.trials.empty());
  EXPECT_EQ(Tally(v), storage::TrialTally());
  EXPECT_FALSE(StudyElapsed(v).has_value());
  auto missing = ReadStudySummary(*db, "emtpy", Tolerance{});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("did you mean 'empty'"), std::string::npos);
}

}  // namespace
}  // namespace hyperpack::report
