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
    if (n % 7 == 0) {
      EXPECT_TRUE(db->AddEvent(s.id, {*t.started + 0.5, n, "trial_paused", ""}).ok());
    }
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

// A rerun_top study read again with no run completed since is answered from memory: its model is
// fitted once per set of completed runs, however many views read it (the dashboard's pages poll),
// and again once another run completes.
TEST(ModelPickTest, IsFittedOncePerSetOfCompletedRuns) {
  auto db = storage::OpenStorage("memory:").value();
  storage::StudyRecord s;
  s.name = "m";
  s.spec_text = std::string(kSpec).replace(std::string(kSpec).find("max_trials: 1000"), 16,
                                           "max_trials: 1000, rerun_top: 5");
  s.metric = "loss";
  s = db->CreateStudy(s).value();
  auto complete = [&](int n) {
    TrialRecord t;
    t.study_id = s.id;
    t.number = n;
    t.params = {{"x", (n * 7 % 13) / 13.0}};
    t.started = 1000.0 + n;
    ASSERT_TRUE(db->InsertTrial(t).ok());
    t.state = TrialState::kCompleted;
    const double x = std::get<double>(t.params.at("x"));
    t.value = (x - 0.3) * (x - 0.3) + 0.01 * (n % 3);
    t.ended = *t.started + 10;
    ASSERT_TRUE(db->FinishTrial(t).ok());
  };
  for (int n = 0; n < 12; ++n) complete(n);
  const int64_t before = ModelPickFits();
  StudyView a = ReadStudyView(*db, "m", ViewParts::kTrials).value();
  Result<ModelPick> pa = PickByModel(a);
  ASSERT_TRUE(pa.ok()) << pa.status().message();
  EXPECT_EQ(ModelPickFits(), before + 1);
  StudyView b = ReadStudyView(*db, "m", ViewParts::kTrials).value();
  ASSERT_TRUE(BestOf(b));
  EXPECT_EQ(BestOf(b)->trial.number, pa->trial->number);
  EXPECT_EQ(ModelPickFits(), before + 1) << "the same runs, another view: from memory";
  complete(12);
  StudyView c = ReadStudyView(*db, "m", ViewParts::kTrials).value();
  ASSERT_TRUE(PickByModel(c).ok());
  EXPECT_EQ(ModelPickFits(), before + 2) << "a run more: fitted again";
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

// ---- several objectives ------------------------------------------------------------------------

constexpr char kTwoObjectiveSpec[] = R"(name: mo
objectives:
  - {metric: acc, direction: maximize}
  - {metric: ms, direction: minimize}
constraints: [{metric: mem, max: 40}]
search_space:
  x: {type: float, low: 0, high: 1}
trial: {command: "true"}
)";

// Trials written by hand: (acc, ms, mem) each, completed unless said.
StudyView TwoObjectiveView() {
  StudyView v;
  v.study.name = "mo";
  v.spec = study::ParseStudy(kTwoObjectiveSpec, "mo.yaml").spec;
  EXPECT_TRUE(v.spec);
  const double rows[][3] = {{0.90, 10, 30},   // 0: front
                            {0.95, 20, 30},   // 1: front
                            {0.85, 15, 30},   // 2: dominated by 0
                            {0.99, 50, 30},   // 3: front
                            {0.99, 5, 45},    // 4: breaks mem: would dominate everything
                            {0.97, 30, 30}};  // 5: front
  for (int n = 0; n < 6; ++n) {
    TrialRecord t;
    t.number = n;
    t.state = TrialState::kCompleted;
    t.values = {{"acc", rows[n][0]}, {"ms", rows[n][1]}, {"mem", rows[n][2]}};
    t.value = rows[n][0];
    v.trials.push_back(t);
  }
  TrialRecord pruned = v.trials[0];
  pruned.number = 6;
  pruned.state = TrialState::kPruned;
  pruned.values["ms"] = 1;  // better than every completed trial, but not completed
  v.trials.push_back(pruned);
  return v;
}

std::vector<int> Numbers(const std::vector<const TrialRecord*>& trials) {
  std::vector<int> out;
  for (const TrialRecord* t : trials) out.push_back(t->number);
  return out;
}

TEST(ParetoSetTest, IsTheCompletedFeasibleTrialsThatNoneDominatesInTheirDirections) {
  EXPECT_EQ(Numbers(ParetoSet(TwoObjectiveView())), (std::vector<int>{0, 1, 3, 5}));
  // One objective: no Pareto set; Ranked leaves out a trial that breaks a constraint.
  StudyView one = TwoObjectiveView();
  one.spec = study::ParseStudy(R"(name: one
objective: {metric: acc, direction: maximize}
constraints: [{metric: mem, max: 40}]
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "true"}
)",
                               "one.yaml")
                 .spec;
  one.study.direction = Direction::kMaximize;
  ASSERT_TRUE(one.spec);
  EXPECT_TRUE(ParetoSet(one).empty());
  EXPECT_EQ(Numbers(Ranked(one)), (std::vector<int>{3, 5, 1, 0, 2}));
}

TEST(ParetoSetTest, PickChoosesTheBestByAMetricAmongTheMembersThatMeetEveryCondition) {
  const StudyView v = TwoObjectiveView();
  auto pick = [&](const std::string& conditions, const std::string& by) -> Result<int> {
    HP_ASSIGN_OR_RETURN(FrontPick p, ParseFrontPick(conditions, by));
    HP_ASSIGN_OR_RETURN(const TrialRecord* t, PickFromFront(v, p));
    return t->number;
  };
  EXPECT_EQ(pick("acc>=0.95", "ms").value(), 1);  // 1, 3 and 5 qualify; 1 is fastest
  EXPECT_EQ(pick("acc>=0.95, ms<30", "acc").value(), 1);
  EXPECT_EQ(pick("ms<=30", "acc").value(), 5);  // maximised: the largest acc
  EXPECT_EQ(pick("", "").value(), 3);           // no condition, by the first objective
  EXPECT_EQ(pick("", "mem").value(), 0);        // a constraint's metric: the smallest; ties
                                                // go to the earlier trial
  Result<int> none = pick("acc>0.99", "ms");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("none of the 4 trials of the Pareto set of study 'mo' "
                                         "meets acc>0.99 (it has acc from 0.9 to 0.99)"),
            std::string::npos)
      << none.status().message();
  Result<int> unknown = pick("accuracy>=0.9", "ms");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("keeps no metric 'accuracy'"), std::string::npos);
  for (const char* bad : {"acc", "acc>=", ">=0.9", "acc>=0.9x", "acc=>0.9", "acc>=nan"})
    EXPECT_FALSE(ParseFrontPick(bad, "").ok()) << bad;
}

}  // namespace
}  // namespace hyperpack::report
