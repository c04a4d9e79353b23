// Ask and tell (scheduler/ask_tell.h) on real stores: proposals from the study's tuner with the
// asked trials pending, what tell refuses, and programs asking from several threads at once.
#include "hyperpack/scheduler/ask_tell.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <thread>

#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/tuner/tuner.h"
#include "local_postgres.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using storage::TrialState;
using ::testing::HasSubstr;

constexpr char kStudy[] = R"(name: q
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: -2, high: 2}
  n: {type: int, low: 1, high: 4}
tuner: {seed: 3}
)";

double Loss(const Config& c) {
  const double x = std::get<double>(c.at("x"));
  return (x - 0.5) * (x - 0.5) + static_cast<double>(std::get<int64_t>(c.at("n")));
}

study::StudySpec Spec(const std::string& text = kStudy) {
  study::ParseOutcome parsed = study::ParseStudy(text, "q.yaml");
  EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
  return *parsed.spec;
}

std::unique_ptr<storage::Storage> Created(const std::string& url = "memory:",
                                          const std::string& text = kStudy) {
  auto db = storage::OpenStorage(url).value();
  bool created = false;
  EXPECT_TRUE(CreateStudy(*db, Spec(text), &created).ok());
  EXPECT_TRUE(created);
  return db;
}

TEST(AskTellTest, AFileWithoutATrialSectionIsForAskingAndRunRefusesIt) {
  const study::StudySpec spec = Spec();
  EXPECT_TRUE(spec.trial.command.empty());
  const Status runnable = study::CheckRunnable(spec);
  EXPECT_EQ(runnable.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(runnable.message(), HasSubstr("hyperpack ask q"));
  EXPECT_TRUE(
      study::CheckRunnable(Spec(std::string(kStudy) + "trial: {command: \"true\"}\n")).ok());
}

TEST(AskTellTest, CreatingAgainFindsTheStudyAndADifferentSpaceIsRefused) {
  auto db = Created();
  bool created = true;
  auto again = CreateStudy(*db, Spec(), &created);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(created);
  std::string other = kStudy;
  other.replace(other.find("high: 4"), 7, "high: 9");
  auto changed = CreateStudy(*db, Spec(other), &created);
  EXPECT_EQ(changed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(changed.status().message(), HasSubstr("different search space"));
}

TEST(AskTellTest, AskedTrialsArePendingAndToldOnesTeachTheTuner) {
  auto db = Created();
  std::set<Config> asked;
  for (int i = 0; i < 4; ++i) {  // none told yet: each is pending for the next
    auto a = Ask(*db, "q", "h", 1000 + i);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(a->number, i);
    EXPECT_TRUE(asked.insert(a->params).second);
  }
  for (int i = 0; i < 4; ++i) {
    auto trials = db->ListTrials(db->FindStudy("q").value()->id).value();
    ASSERT_TRUE(
        TellTrial(*db, "q", i, {TrialState::kCompleted, Loss(trials[i].params), {}, {}}, 2000)
            .ok());
  }
  double best = INFINITY;
  for (int i = 4; i < 20; ++i) {
    auto a = Ask(*db, "q", "h", 3000 + i);
    ASSERT_TRUE(a.ok()) << a.status().message();
    best = std::min(best, Loss(a->params));
    ASSERT_TRUE(
        TellTrial(*db, "q", a->number, {TrialState::kCompleted, Loss(a->params), {}, {}}, 4000)
            .ok());
  }
  EXPECT_LT(best, 1.01);  // the floor is 1 (x = 0.5, n = 1)
  const auto trials = db->ListTrials(db->FindStudy("q").value()->id).value();
  ASSERT_EQ(trials.size(), 20u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, TrialState::kCompleted);
    EXPECT_EQ(t.value, Loss(t.params));
    EXPECT_EQ(t.host, "h");
  }
}

// Each ask keeps the tuner's state with the study, and the next ask starts from it: its proposals
// are those of a tuner that lived through the study (tuner::Tuner::SaveState). A state that is
// damaged is refitted from, not trusted.
TEST(AskTellTest, EachAskKeepsTheTunersStateForTheNext) {
  auto db = Created();
  const int64_t id = db->FindStudy("q").value()->id;
  const study::StudySpec spec = Spec();
  auto living =
      tuner::MakeTuner(spec.space, TunerOptionsFor(spec, db->FindStudy("q").value()->seed)).value();
  for (int i = 0; i < 12; ++i) {
    auto a = Ask(*db, "q", "h", 1000 + i);
    ASSERT_TRUE(a.ok()) << a.status().message();
    auto b = living->Propose(1, {});
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(std::get<int64_t>(a->params.at("n")), std::get<int64_t>(b->front().at("n"))) << i;
    EXPECT_NEAR(std::get<double>(a->params.at("x")), std::get<double>(b->front().at("x")), 1e-6)
        << i;
    ASSERT_TRUE(
        TellTrial(*db, "q", a->number, {TrialState::kCompleted, Loss(a->params), {}, {}}, 2000 + i)
            .ok());
    tuner::TrialOutcome o;
    o.config = a->params;
    o.value = Loss(a->params);
    living->Observe(o);
  }
  EXPECT_EQ(*db->TunerState(id), living->SaveState());
  EXPECT_EQ(db->TunerState(id)->rfind("gp2 ", 0), 0u);
  ASSERT_TRUE(db->SetTunerState(id, "gp1 damaged").ok());
  EXPECT_TRUE(Ask(*db, "q", "h", 3000).ok());
  EXPECT_EQ(db->TunerState(id)->rfind("gp2 0 ", 0), 0u);  // fitted anew, and kept
}

// A study with two objectives and a constraint, evaluated by another program: each trial is told
// with every value by metric, the next ask rebuilds the tuner from them, and tell refuses what the
// study does not keep.
TEST(AskTellTest, SeveralObjectivesAreToldByMetric) {
  auto db = storage::OpenStorage("memory:").value();
  bool created = false;
  ASSERT_TRUE(CreateStudy(*db, Spec(R"(name: mo
objectives: [{metric: a, direction: minimize}, {metric: b, direction: maximize}]
constraints: [{metric: mem, max: 1}]
search_space: {x: {type: float, low: 0, high: 1}}
tuner: {seed: 2}
)"),
                          &created)
                  .ok());
  for (int i = 0; i < 8; ++i) {
    auto asked = Ask(*db, "mo", "h", 10 + i);
    ASSERT_TRUE(asked.ok()) << asked.status().message();
    const double x = std::get<double>(asked->params.at("x"));
    Tell tell{TrialState::kCompleted, std::nullopt, {}, {{"a", x}, {"b", x * x}, {"mem", 0.5}}};
    ASSERT_TRUE(TellTrial(*db, "mo", asked->number, tell, 20 + i).ok());
  }
  const int64_t id = db->FindStudy("mo").value()->id;
  const std::vector<storage::TrialRecord> trials = db->ListTrials(id).value();
  ASSERT_EQ(trials.size(), 8u);
  EXPECT_EQ(trials[3].values.at("mem"), 0.5);
  EXPECT_EQ(trials[3].value, trials[3].values.at("a"));
  auto next = Ask(*db, "mo", "h", 40);
  ASSERT_TRUE(next.ok()) << next.status().message();
  auto refused = [&](Tell tell) {
    Status s = TellTrial(*db, "mo", next->number, tell, 41);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(refused({TrialState::kCompleted, 0.3, {}, {}}),
              HasSubstr("tell them with --values 'a=V,b=V,mem=V'"));
  EXPECT_THAT(refused({TrialState::kCompleted, std::nullopt, {}, {{"a", 0.1}}}),
              HasSubstr("needs a finite b"));
  EXPECT_THAT(refused({TrialState::kCompleted, std::nullopt, {}, {{"a", 1}, {"b", 2}, {"c", 3}}}),
              HasSubstr("keeps no metric 'c'"));
  // A pruned trial needs only the first objective.
  EXPECT_TRUE(
      TellTrial(*db, "mo", next->number, {TrialState::kPruned, std::nullopt, 2, {{"a", 0.4}}}, 42)
          .ok());
}

TEST(AskTellTest, TellSaysWhatIsWrong) {
  auto db = Created();
  ASSERT_TRUE(Ask(*db, "q", "h", 1).ok());
  EXPECT_EQ(TellTrial(*db, "q", 0, {TrialState::kCompleted, std::nullopt, {}, {}}, 2).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TellTrial(*db, "q", 0, {TrialState::kCompleted, NAN, {}, {}}, 2).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TellTrial(*db, "q", 0, {TrialState::kFailed, 1.0, {}, {}}, 2).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TellTrial(*db, "q", 0, {TrialState::kRunning, std::nullopt, {}, {}}, 2).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TellTrial(*db, "q", 7, {TrialState::kFailed, std::nullopt, {}, {}}, 2).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(TellTrial(*db, "nope", 0, {TrialState::kFailed, std::nullopt, {}, {}}, 2).code(),
            StatusCode::kNotFound);
  // One objective: --values is refused, saying to tell --value.
  EXPECT_EQ(TellTrial(*db, "q", 0, {TrialState::kCompleted, std::nullopt, {}, {{"loss", 1}}}, 2)
                    .message()
                    .find("tell it with --value V") != std::string::npos,
            true);
  ASSERT_TRUE(TellTrial(*db, "q", 0, {TrialState::kPruned, 0.7, 3, {}}, 2).ok());
  const Status twice = TellTrial(*db, "q", 0, {TrialState::kFailed, std::nullopt, {}, {}}, 3);
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("it is pruned"));
  // The pruned value is kept as the objective's point at its step.
  const int64_t id = db->FindStudy("q").value()->id;
  auto last = db->LatestMetric(id, 0, "loss").value();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->step, 3);
  EXPECT_EQ(last->value, 0.7);
}

TEST(AskTellTest, AStudyARunnerHoldsIsNotAskedAndAMissingOneIsNotFound) {
  auto db = Created();
  const int64_t id = db->FindStudy("q").value()->id;
  ASSERT_TRUE(db->SetRunner(id, 4242, "another-host").ok());
  auto held = Ask(*db, "q", "h", 1);
  EXPECT_EQ(held.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(held.status().message(), HasSubstr("another-host"));
  auto missing = Ask(*db, "nope", "h", 1);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("hyperpack create"));
}

// Asked trials that go quiet, on each kind of store (the heartbeat is a column of its own).
void ExpectAQuietTrialIsFailedAndAskedAgain(const std::string& url) {
  auto db = Created(url, std::string(kStudy) + "ask_timeout: 60s\nbudget: {max_attempts: 2}\n");
  const int64_t id = db->FindStudy("q").value()->id;
  AskedTrial first = Ask(*db, "q", "h", 1000).value();
  ASSERT_TRUE(HeartbeatTrial(*db, "q", first.number, 1050).ok());
  // 50 s after its heartbeat: still alive.
  AskedTrial second = Ask(*db, "q", "h", 1100).value();
  EXPECT_EQ(second.number, 1);
  EXPECT_EQ(db->ListTrials(id).value()[0].state, TrialState::kRunning);
  // 150 s after it, 100 s after the second's ask: both are failed, and the first's configuration
  // is this ask's, the second's the next one's.
  AskedTrial again = Ask(*db, "q", "h", 1200).value();
  EXPECT_EQ(again.number, 2);
  EXPECT_EQ(again.params, first.params);
  EXPECT_EQ(Ask(*db, "q", "h", 1201).value().params, second.params);
  std::vector<storage::TrialRecord> trials = db->ListTrials(id).value();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, HasSubstr("no tell or heartbeat for 2m30s"));
  EXPECT_EQ(trials[2].retry_of, 0);
  EXPECT_EQ(trials[2].attempt, 2);
  EXPECT_EQ(trials[2].heartbeat, 1200);
  // A late tell, or heartbeat, is refused with what happened.
  Tell late;
  late.value = 1.0;
  const Status told = TellTrial(*db, "q", first.number, late, 1300);
  EXPECT_EQ(told.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(told.message(), HasSubstr("is not running: it is failed (no tell or heartbeat"));
  EXPECT_EQ(HeartbeatTrial(*db, "q", first.number, 1300).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(HeartbeatTrial(*db, "q", 99, 1300).code(), StatusCode::kNotFound);
  // The second attempt goes quiet too: failed, and not asked a third time (max_attempts: 2).
  ASSERT_TRUE(HeartbeatTrial(*db, "q", 3, 1290).ok());
  ASSERT_TRUE(TellTrial(*db, "q", 3, late, 1300).ok());
  AskedTrial fresh = Ask(*db, "q", "h", 1400).value();
  trials = db->ListTrials(id).value();
  EXPECT_EQ(trials[2].state, TrialState::kFailed);
  EXPECT_THAT(trials[2].error, HasSubstr("not asked again after 2 attempts"));
  EXPECT_EQ(trials[3].state, TrialState::kCompleted);
  EXPECT_NE(fresh.params, first.params);
  EXPECT_FALSE(trials.back().retry_of.has_value());
}

TEST(AskTellTest, AQuietTrialIsFailedAndAskedAgain) {
  ExpectAQuietTrialIsFailedAndAskedAgain("memory:");
}

TEST(AskTellTest, AQuietTrialIsFailedAndAskedAgainOnSQLite) {
  testing::TempDir dir;
  ExpectAQuietTrialIsFailedAndAskedAgain(dir / "q.db");
}

TEST(AskTellTest, WithoutAnAskTimeoutAnAskedTrialWaitsForItsTell) {
  auto db = Created();
  const int number = Ask(*db, "q", "h", 0).value().number;
  Ask(*db, "q", "h", 1e7).value();
  EXPECT_EQ(db->ListTrials(db->FindStudy("q").value()->id).value()[0].state, TrialState::kRunning);
  EXPECT_TRUE(HeartbeatTrial(*db, "q", number, 1e7).ok());
  EXPECT_THAT(study::ParseStudy(std::string(kStudy) + "ask_timeout: 0\n", "q.yaml").ErrorText(),
              HasSubstr("q.yaml:7:14: ask_timeout: '0' is not a duration"));
  EXPECT_EQ(Spec(std::string(kStudy) + "ask_timeout: 10m\n").ask_timeout_s, 600);
}

// Programs asking side by side, each with its own connection to one store: every ask gets its own
// number and a configuration no other got.
void ExpectThreadsGetTheirOwnTrials(const std::string& url) {
  Created(url);
  constexpr int kThreads = 3, kAsks = 6;
  std::vector<std::vector<AskedTrial>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      auto db = storage::OpenStorage(url).value();
      for (int k = 0; k < kAsks; ++k) {
        auto a = Ask(*db, "q", "t" + std::to_string(i), 10.0 * k);
        if (a.ok()) got[i].push_back(*a);
      }
    });
  for (auto& t : threads) t.join();
  std::set<int> numbers;
  std::set<Config> configs;
  for (const auto& mine : got) {
    EXPECT_EQ(mine.size(), static_cast<size_t>(kAsks));
    for (const AskedTrial& a : mine) {
      numbers.insert(a.number);
      configs.insert(a.params);
    }
  }
  EXPECT_EQ(numbers.size(), static_cast<size_t>(kThreads * kAsks));
  EXPECT_EQ(*numbers.rbegin(), kThreads * kAsks - 1);
  EXPECT_EQ(configs.size(), static_cast<size_t>(kThreads * kAsks));
}

TEST(AskTellTest, ThreadsAskingAtOnceGetTheirOwnTrials) {
  testing::TempDir dir;
  ExpectThreadsGetTheirOwnTrials(dir / "q.db");
}

#ifdef HYPERPACK_WITH_POSTGRES
// On PostgreSQL the askers' transactions run side by side: a number two of them took is retried.
TEST(AskTellTest, ThreadsAskingAtOnceGetTheirOwnTrialsOnPostgreSQL) {
  std::string error;
  auto server = testing::LocalPostgres::Start(&error);
  if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(server, nullptr) << error;
  const std::string url = server->NewDatabase("asks", &error);
  ASSERT_FALSE(url.empty()) << error;
  ExpectThreadsGetTheirOwnTrials(url);
}

TEST(AskTellTest, AQuietTrialIsFailedAndAskedAgainOnPostgreSQL) {
  std::string error;
  auto server = testing::LocalPostgres::Start(&error);
  if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(server, nullptr) << error;
  const std::string url = server->NewDatabase("quiet", &error);
  ASSERT_FALSE(url.empty()) << error;
  ExpectAQuietTrialIsFailedAndAskedAgain(url);
}
#endif

}  // namespace
}  // namespace hyperpack::scheduler
