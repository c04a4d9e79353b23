#include "hyperpack/storage/storage.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "local_postgres.h"
#include "rows.h"
#include "test_util.h"

namespace hyperpack::storage {
namespace {

using hyperpack::testing::LocalPostgres;
using hyperpack::testing::ReadFile;
using hyperpack::testing::TempDir;

StudyRecord NewStudy(const std::string& name) {
  StudyRecord s;
  s.name = name;
  s.spec_text = "name: " + name + "\n";
  s.spec_path = "study.yaml";
  s.direction = Direction::kMinimize;
  s.metric = "loss";
  s.seed = 42;
  s.created = 1000.0;
  return s;
}

TrialRecord NewTrial(int64_t study, int number, TrialState state = TrialState::kRunning) {
  TrialRecord t;
  t.study_id = study;
  t.number = number;
  t.state = state;
  t.params = {{"x", int64_t{number}}};
  t.started = 2000.0 + number;
  t.host = "h";
  return t;
}

std::unique_ptr<Storage> OpenOrDie(const std::string& path, Storage::Options o = {}) {
  auto db = Storage::Open(path, o);
  EXPECT_TRUE(db.ok()) << db.status().message();
  return db.ok() ? std::move(db).value() : nullptr;
}

// The contract of storage.h, run once per backend: StorageContractTest.X/sqlite, .../memory and,
// where hyperpack is built with libpq, .../postgresql on a throwaway server (local_postgres.h)
// that this test process starts. Each test has a store of its own; Open() gives another handle on
// it.
enum class Backend { kSqlite, kMemory, kPostgresql };
const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kSqlite:
      return "sqlite";
    case Backend::kMemory:
      return "memory";
    case Backend::kPostgresql:
      return "postgresql";
  }
  return "?";
}

class StorageContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() != Backend::kPostgresql) return;
    std::string error;
    LocalPostgres* server = Server(&error);
    if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
    ASSERT_NE(server, nullptr) << error;
    static int databases = 0;  // one per test, in this process's server
    url_ = server->NewDatabase(StrCat("contract", databases++), &error);
    ASSERT_FALSE(url_.empty()) << error;
  }

  std::unique_ptr<Storage> Open(Storage::Options o = {}) { return OpenOrDie(Url(), o); }
  std::string Url() const {
    if (GetParam() == Backend::kSqlite) return "sqlite://" + (dir_ / "h.db");
    if (GetParam() == Backend::kPostgresql) return url_;
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return StrCat("memory://", test->test_suite_name(), ".", test->name());
  }

 private:
  // One server for this process (ctest runs each test in a process of its own), stopped at exit.
  static LocalPostgres* Server(std::string* error) {
    static std::string start_error;
    static std::unique_ptr<LocalPostgres> server = LocalPostgres::Start(&start_error);
    *error = start_error;
    return server.get();
  }

  TempDir dir_;
  std::string url_;
};

#ifdef HYPERPACK_WITH_POSTGRES
#define HP_STORAGE_BACKENDS Backend::kSqlite, Backend::kMemory, Backend::kPostgresql
#else
#define HP_STORAGE_BACKENDS Backend::kSqlite, Backend::kMemory
#endif
INSTANTIATE_TEST_SUITE_P(Backends, StorageContractTest, ::testing::Values(HP_STORAGE_BACKENDS),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(BackendName(info.param));
                         });

TEST_P(StorageContractTest, CreatesSchemaAndFindsStudiesByName) {
  auto db = Open();
  EXPECT_EQ(db->schema_version(), DefaultMigrations().back().version);
  auto created = db->CreateStudy(NewStudy("a"));
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_GT(created->id, 0);
  auto found = db->FindStudy("a");
  ASSERT_TRUE(found.ok());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->spec_text, "name: a\n");
  EXPECT_EQ((*found)->seed, 42u);
  EXPECT_EQ((*found)->direction, Direction::kMinimize);
  auto missing = db->FindStudy("b");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  // The direction is stored by name, and read back as the type.
  StudyRecord up = NewStudy("up");
  up.direction = Direction::kMaximize;
  ASSERT_TRUE(db->CreateStudy(up).ok());
  auto found_up = db->FindStudy("up");
  ASSERT_TRUE(found_up.ok() && found_up->has_value());
  EXPECT_EQ((*found_up)->direction, Direction::kMaximize);
}

TEST_P(StorageContractTest, RejectsADuplicateStudyName) {
  auto db = Open();
  ASSERT_TRUE(db->CreateStudy(NewStudy("a")).ok());
  auto again = db->CreateStudy(NewStudy("a"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  auto all = db->ListStudies();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
}

TEST_P(StorageContractTest, TrialsMetricsAndEventsRoundTrip) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0)).ok());
  TrialRecord placed = NewTrial(id, 1);
  placed.placement = {{"n1", {0, 1}, 2}};
  // Every kind of value a parameter holds, a structured one's JSON text among them.
  placed.params = {{"lr", 0.001},    {"layers", int64_t{3}},      {"bn", true},
                   {"opt", "adamw"}, {"arch", R"([64,{"k":3}])"}, {"one", 1.0}};
  ASSERT_TRUE(db->InsertTrial(placed).ok());
  std::vector<MetricPoint> points = {{1, "loss", 0.5, 3000}, {2, "loss", 0.25, 3001}};
  ASSERT_TRUE(db->AddMetrics(id, 1, points).ok());
  TrialRecord done = NewTrial(id, 1);
  done.state = TrialState::kCompleted;
  done.value = 0.25;
  done.ended = 3002;
  done.exit_status = 0;
  // A study with several objectives: each one's value, by metric.
  done.values = {{"loss", 0.25}, {"latency_ms", 12.5}, {"val/acc", -3e-7}};
  ASSERT_TRUE(db->FinishTrial(done).ok());
  ASSERT_TRUE(db->AddEvent(id, {3003, 1, "trial_finished", "completed"}).ok());

  auto trials = db->ListTrials(id);
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].state, TrialState::kRunning);
  EXPECT_EQ((*trials)[1].state, TrialState::kCompleted);
  EXPECT_EQ((*trials)[1].value, 0.25);
  EXPECT_EQ((*trials)[1].exit_status, 0);
  EXPECT_EQ((*trials)[0].params, NewTrial(id, 0).params);
  EXPECT_EQ((*trials)[1].params, placed.params);  // 1.0 stays a double, "[...]" a string
  EXPECT_EQ((*trials)[1].placement, placed.placement);
  EXPECT_TRUE((*trials)[0].placement.empty());
  EXPECT_EQ((*trials)[1].values, done.values);
  EXPECT_TRUE((*trials)[0].values.empty());
  auto metrics = db->TrialMetrics(id, 1);
  ASSERT_TRUE(metrics.ok());
  ASSERT_EQ(metrics->size(), 2u);
  EXPECT_EQ((*metrics)[1].step, 2);
  EXPECT_EQ((*metrics)[1].value, 0.25);
  auto events = db->ListEvents(id, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].trial, 1);
  EXPECT_EQ(db->NextTrialNumber(id).value(), 2);
}

TEST_P(StorageContractTest, TheLatestPointOfAMetricIsTheLastWrittenForItsName) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0)).ok());
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 1)).ok());
  EXPECT_FALSE(db->LatestMetric(id, 0, "loss").value().has_value());
  // Steps out of order (a resumed trial reports again from its checkpoint): the last written wins.
  const std::vector<MetricPoint> points = {
      {1, "loss", 0.9, 10}, {5, "loss", 0.5, 11}, {3, "loss", 0.7, 12}, {4, "acc", 0.6, 13}};
  ASSERT_TRUE(db->AddMetrics(id, 0, points).ok());
  ASSERT_TRUE(db->AddMetrics(id, 1, std::vector<MetricPoint>{{9, "loss", 0.1, 14}}).ok());
  const auto loss = db->LatestMetric(id, 0, "loss").value();
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->step, 3);
  EXPECT_EQ(loss->value, 0.7);
  EXPECT_EQ(loss->time, 12);
  EXPECT_EQ(db->LatestMetric(id, 0, "acc").value()->value, 0.6);
  EXPECT_FALSE(db->LatestMetric(id, 0, "lr").value().has_value());
  EXPECT_FALSE(db->LatestMetric(id, 7, "loss").value().has_value());
}

TEST_P(StorageContractTest, EventsOfSomeKindsComeAloneInTheirOrder) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  int64_t other = db->CreateStudy(NewStudy("b"))->id;
  const char* kinds[] = {"trial_started", "trial_paused", "promoted",
                         "trial_resumed", "trial_paused", "trial_finished"};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(db->AddEvent(id, {10.0 + i, 1, kinds[i], ""}).ok());
  ASSERT_TRUE(db->AddEvent(other, {1, 1, "trial_paused", ""}).ok());
  constexpr EventKind kRuns[] = {EventKind::kTrialPaused, EventKind::kTrialResumed};
  auto runs = db->ListEventsOfKinds(id, kRuns).value();
  std::vector<std::pair<std::string, double>> got;
  for (const auto& e : runs) got.emplace_back(e.kind, e.time);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, double>>{
                     {"trial_paused", 11}, {"trial_resumed", 13}, {"trial_paused", 14}}));
  EXPECT_TRUE(db->ListEventsOfKinds(id, {}).value().empty());
}

TEST_P(StorageContractTest, FinishingAnUnknownTrialIsAnError) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  TrialRecord ghost = NewTrial(id, 7, TrialState::kCompleted);
  Status s = db->FinishTrial(ghost);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(db->AddMetrics(id, 7, std::vector<MetricPoint>{{0, "x", 1, 1}}).code(),
            StatusCode::kNotFound);
}

// What `status` asks instead of reading every trial: each answer is what the full list says.
TEST_P(StorageContractTest, TallyBestAndStateQueriesAgreeWithTheFullList) {
  auto db = Open();
  const int64_t id = db->CreateStudy(NewStudy("a"))->id;
  const int64_t other = db->CreateStudy(NewStudy("b"))->id;
  ASSERT_TRUE(db->InsertTrial(NewTrial(other, 0)).ok());  // another study's: never counted
  EXPECT_EQ(db->TallyTrials(id).value(), TrialTally());
  // Values with ties, a NaN and a pruned trial better than all: only completed ones rank.
  const std::vector<std::pair<TrialState, std::optional<double>>> rows = {
      {TrialState::kCompleted, 0.5}, {TrialState::kCompleted, 0.2},
      {TrialState::kPruned, 0.01},   {TrialState::kCompleted, std::nan("")},
      {TrialState::kCompleted, 0.2}, {TrialState::kFailed, std::nullopt},
      {TrialState::kCompleted, 0.9}, {TrialState::kRunning, std::nullopt},
      {TrialState::kPaused, 0.3},    {TrialState::kPending, std::nullopt}};
  for (int n = 0; n < static_cast<int>(rows.size()); ++n) {
    TrialRecord t = NewTrial(id, n);
    if (rows[n].first == TrialState::kPending) {
      t.state = TrialState::kPending;
      t.started.reset();
    }
    ASSERT_TRUE(db->InsertTrial(t).ok());
    if (rows[n].first == TrialState::kRunning || rows[n].first == TrialState::kPending) continue;
    t.state = rows[n].first;
    t.value = rows[n].second;
    t.ended = 3000.0 + n;
    ASSERT_TRUE(db->FinishTrial(t).ok());
  }
  const std::vector<TrialRecord> all = db->ListTrials(id).value();
  const TrialTally tally = db->TallyTrials(id).value();
  EXPECT_EQ(tally, TallyOf(all));
  EXPECT_EQ(tally.counts.at(TrialState::kCompleted), 5);
  EXPECT_EQ(tally.Finished(), 7);
  EXPECT_EQ(tally.first_start, 2000.0);
  EXPECT_EQ(tally.last_end, 3008.0);
  EXPECT_EQ(tally.running_on, 1);

  auto numbers = [](const std::vector<TrialRecord>& trials) {
    std::vector<int> out;
    for (const TrialRecord& t : trials) out.push_back(t.number);
    return out;
  };
  EXPECT_EQ(numbers(db->BestTrials(id, Direction::kMinimize, std::nullopt, -1).value()),
            (std::vector<int>{1, 4, 0, 6}));
  EXPECT_EQ(numbers(db->BestTrials(id, Direction::kMaximize, std::nullopt, 2).value()),
            (std::vector<int>{6, 0}));
  EXPECT_EQ(numbers(db->BestTrials(id, Direction::kMinimize, 0.5, -1).value()),
            (std::vector<int>{1, 4, 0}));
  EXPECT_EQ(db->BestTrials(id, Direction::kMinimize, std::nullopt, 1).value()[0].params,
            NewTrial(id, 1).params);
  const TrialState open[] = {TrialState::kRunning, TrialState::kPaused};
  EXPECT_EQ(numbers(db->ListTrialsIn(id, open).value()), (std::vector<int>{7, 8}));
  EXPECT_TRUE(db->ListTrialsIn(id, {}).value().empty());
}

TEST_P(StorageContractTest, InterruptUnfinishedMarksOnlyRunningAndPendingTrials) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0, TrialState::kCompleted)).ok());
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 1, TrialState::kRunning)).ok());
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 2, TrialState::kPending)).ok());
  auto numbers = db->InterruptUnfinished(id, 5000, "runner died");
  ASSERT_TRUE(numbers.ok());
  EXPECT_EQ(*numbers, (std::vector<int>{1, 2}));
  auto trials = db->ListTrials(id).value();
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  EXPECT_EQ(trials[1].state, TrialState::kInterrupted);
  EXPECT_EQ(trials[1].error, "runner died");
  EXPECT_EQ(trials[2].state, TrialState::kInterrupted);
}

TEST_P(StorageContractTest, APausedTrialSurvivesARunnersDeathAndResumesUnderItsNumber) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  TrialRecord t = NewTrial(id, 0, TrialState::kRunning);
  ASSERT_TRUE(db->InsertTrial(t).ok());
  t.state = TrialState::kPaused;
  t.value = 0.5;
  t.ended = 10;
  t.exit_status = 0;
  t.error = "asha: paused at rung 1";
  ASSERT_TRUE(db->FinishTrial(t).ok());
  EXPECT_FALSE(storage::IsFinished(TrialState::kPaused));
  EXPECT_TRUE(db->InterruptUnfinished(id, 20, "runner died")->empty());
  EXPECT_EQ(db->ListTrials(id).value()[0].state, TrialState::kPaused);
  const std::vector<RankRecord> moved = {{"n2", {3}, 1}};
  ASSERT_TRUE(db->ResumeTrial(id, 0, moved).ok());
  TrialRecord back = db->ListTrials(id).value()[0];
  EXPECT_EQ(back.state, TrialState::kRunning);
  EXPECT_EQ(back.placement, moved);  // promoted onto other devices
  EXPECT_FALSE(back.ended.has_value());
  EXPECT_FALSE(back.exit_status.has_value());
  EXPECT_EQ(back.error, "");
  EXPECT_EQ(back.value, 0.5);  // the rung's value stays until the trial ends again
  // Only a paused trial can resume.
  EXPECT_EQ(db->ResumeTrial(id, 0, moved).code(), StatusCode::kNotFound);
}

TEST_P(StorageContractTest, TransactionRollsBackEverythingWhenTheBodyFails) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  Status s = db->Transaction([&]() -> Status {
    HP_RETURN_IF_ERROR(db->InsertTrial(NewTrial(id, 0)));
    HP_RETURN_IF_ERROR(db->InsertTrial(NewTrial(id, 1)));
    return db->InsertTrial(NewTrial(id, 0));  // duplicate number: fails
  });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(db->ListTrials(id)->empty());
  // The connection is usable afterwards.
  EXPECT_TRUE(db->InsertTrial(NewTrial(id, 0)).ok());
}

// A reader on another handle, on another thread, sees each of the writer's transactions whole or
// not at all: the writer adds trials two at a time, so every count read is even. Before each
// transaction the writer waits for the reader to begin another read, so the two interleave.
TEST_P(StorageContractTest, AReaderOnAnotherThreadSeesEachTransactionWholeOrNotAtAll) {
  auto writer = Open();
  const int64_t id = writer->CreateStudy(NewStudy("a"))->id;
  constexpr int kPairs = 200;
  std::atomic<bool> done{false};
  std::atomic<int> attempts{0};
  std::vector<size_t> odd;
  int reads = 0;
  std::thread reader_thread([&] {
    auto reader = Open();
    while (!done.load()) {
      attempts.fetch_add(1);
      auto trials = reader->ListTrials(id);
      if (!trials.ok()) continue;  // SQLite: busy for a moment
      ++reads;
      if (trials->size() % 2) odd.push_back(trials->size());
    }
  });
  for (int p = 0; p < kPairs; ++p) {
    const int seen = attempts.load();
    while (attempts.load() == seen) std::this_thread::yield();
    ASSERT_TRUE(writer
                    ->Transaction([&]() -> Status {
                      HP_RETURN_IF_ERROR(writer->InsertTrial(NewTrial(id, 2 * p)));
                      return writer->InsertTrial(NewTrial(id, 2 * p + 1));
                    })
                    .ok());
  }
  done = true;
  reader_thread.join();
  EXPECT_TRUE(odd.empty()) << odd.size() << " of " << reads << " reads saw half a transaction";
  EXPECT_GT(reads, 0);
  EXPECT_EQ(Open()->ListTrials(id)->size(), 2u * kPairs);
}

#ifdef HYPERPACK_WITH_POSTGRES
// As on SQLite (RefusesADatabaseFromANewerVersionAndLeavesItUntouched): a PostgreSQL database a
// newer hyperpack wrote is refused, by writers and readers, and nothing of it changes.
TEST(PostgresStorageTest, RefusesADatabaseFromANewerVersionAndLeavesItUntouched) {
  std::string error;
  auto server = LocalPostgres::Start(&error);
  if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(server, nullptr) << error;
  const std::string url = server->NewDatabase("newer", &error);
  ASSERT_FALSE(url.empty()) << error;
  OpenOrDie(url)->CreateStudy(NewStudy("a")).value();
  ASSERT_EQ(server->Sql("newer", "INSERT INTO schema_version(version) VALUES (99)").exit_code, 0);
  for (bool read_only : {false, true}) {
    Storage::Options o;
    o.read_only = read_only;
    auto db = OpenStorage(url, o);
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.status().code(), StatusCode::kFailedPrecondition) << db.status().message();
    EXPECT_NE(db.status().message().find("99"), std::string::npos) << db.status().message();
  }
  EXPECT_EQ(server->Sql("newer", "SELECT count(*) FROM studies").out, "1\n");
  EXPECT_EQ(server->Sql("newer", "SELECT max(version) FROM schema_version").out, "99\n");
}
#endif

TEST(StorageUrlTest, APathAndItsSqliteUrlAreTheSameFile) {
  TempDir dir;
  OpenOrDie(dir / "h.db")->CreateStudy(NewStudy("a")).value();
  auto found = OpenOrDie("sqlite://" + (dir / "h.db"))->FindStudy("a");
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->has_value());
}

TEST(StorageUrlTest, OnlyAPathOrASqliteUrlNamesAFile) {
  EXPECT_EQ(StorageFile("runs/h.db"), std::optional<std::string>("runs/h.db"));
  EXPECT_EQ(StorageFile("sqlite:///data/h.db"), std::optional<std::string>("/data/h.db"));
  EXPECT_EQ(StorageFile("postgresql://hp@db:5432/hp"), std::nullopt);
  EXPECT_EQ(StorageFile("memory://x"), std::nullopt);
  EXPECT_EQ(StorageFile("memory:"), std::nullopt);
}

TEST(StorageUrlTest, AnUnknownSchemeIsRefusedByName) {
  auto db = OpenStorage("mysql://localhost/hp");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(db.status().message().find("'mysql' is not a backend"), std::string::npos)
      << db.status().message();
}

// A named memory store lives while a handle is open on it; "memory:" is a store of its own.
TEST(StorageUrlTest, AMemoryStoreIsSharedByNameAndGoneWithItsLastHandle) {
  Storage::Options read_only;
  read_only.read_only = true;
  {
    auto first = OpenOrDie("memory://shared");
    first->CreateStudy(NewStudy("a")).value();
    EXPECT_TRUE(OpenOrDie("memory://shared", read_only)->FindStudy("a")->has_value());
    EXPECT_TRUE(OpenOrDie("memory:")->ListStudies()->empty());
  }
  auto gone = OpenStorage("memory://shared", read_only);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(OpenOrDie("memory://shared")->ListStudies()->empty());
}

TEST(StorageTest, ReadOnlyOpenOfAMissingFileIsNotFoundAndCreatesNothing) {
  TempDir dir;
  Storage::Options o;
  o.read_only = true;
  auto db = Storage::Open(dir / "nope.db", o);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_NE(db.status().message().find("nope.db"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "nope.db"));
}

// The leader lease of `hyperpack serve`: one handle on a store holds it at a time, and it is free
// again when that handle is closed.
TEST_P(StorageContractTest, OneHandleLeadsAtATimeAndTheLeaseEndsWithIt) {
  auto first = Open();
  auto second = Open();
  EXPECT_TRUE(first->TryLead().value());
  EXPECT_TRUE(first->TryLead().value()) << "it still holds it";
  EXPECT_FALSE(second->TryLead().value());
  first.reset();
  EXPECT_TRUE(second->TryLead().value());
}

TEST_P(StorageContractTest, AReadOnlyHandleReadsButCannotWrite) {
  auto writer = Open();
  writer->CreateStudy(NewStudy("a")).value();
  Storage::Options o;
  o.read_only = true;
  auto reader = Open(o);
  EXPECT_FALSE(reader->CreateStudy(NewStudy("b")).ok());
  EXPECT_EQ(reader->ListStudies()->size(), 1u);
}

TEST(StorageTest, MigratesAnOlderDatabaseForwardKeepingItsData) {
  TempDir dir;
  std::string path = dir / "h.db";
  std::vector<Migration> v1 = DefaultMigrations();
  {
    Storage::Options o;
    o.migrations = &v1;
    auto db = OpenOrDie(path, o);
    int64_t id = db->CreateStudy(NewStudy("a"))->id;
    ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0, TrialState::kCompleted)).ok());
  }
  // A later schema adds a column and a table.
  std::vector<Migration> v2 = v1;
  int next = v1.back().version + 1;
  v2.push_back({next,
                "ALTER TABLE trials ADD COLUMN checkpoint TEXT NOT NULL DEFAULT '';"
                "CREATE TABLE notes (text TEXT);"});
  Storage::Options o;
  o.migrations = &v2;
  auto db = OpenOrDie(path, o);
  EXPECT_EQ(db->schema_version(), next);
  auto study = db->FindStudy("a").value();
  ASSERT_TRUE(study.has_value());
  auto trials = db->ListTrials(study->id).value();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  // The new column exists; opening again applies nothing twice.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, "SELECT checkpoint FROM trials", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(raw, "SELECT COUNT(*) FROM schema_version", -1, &stmt, nullptr);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), next);
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
  db.reset();
  auto again = OpenOrDie(path, o);
  EXPECT_EQ(again->schema_version(), next);
}

TEST(StorageTest, RefusesADatabaseFromANewerVersionAndLeavesItUntouched) {
  TempDir dir;
  std::string path = dir / "h.db";
  std::vector<Migration> newer = DefaultMigrations();
  newer.push_back({newer.back().version + 1, "CREATE TABLE future (x INTEGER);"});
  {
    Storage::Options o;
    o.migrations = &newer;
    OpenOrDie(path, o)->CreateStudy(NewStudy("a")).value();
  }
  std::string before = ReadFile(path);
  auto db = Storage::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("newer hyperpack"), std::string::npos)
      << db.status().message();
  EXPECT_EQ(ReadFile(path), before);
}

TEST_P(StorageContractTest, AReaderInAnotherProcessReadsWhileAWriterCommits) {
  if (GetParam() == Backend::kMemory)
    GTEST_SKIP() << "a store in one process: none other writes it";
  const std::string url = Url();
  int64_t id = Open()->CreateStudy(NewStudy("a"))->id;
  constexpr int kTrials = 150;
  constexpr int kPauseAt = kTrials / 2;
  int inside[2], go[2];
  ASSERT_EQ(pipe(inside), 0);
  ASSERT_EQ(pipe(go), 0);
  pid_t writer = fork();
  if (writer == 0) {
    auto db = OpenStorage(url);
    if (!db.ok()) _exit(2);
    for (int n = 0; n < kTrials; ++n) {
      Status s = (*db)->Transaction([&]() -> Status {
        HP_RETURN_IF_ERROR((*db)->InsertTrial(NewTrial(id, n)));
        std::vector<MetricPoint> pts;
        for (int k = 0; k < 20; ++k) pts.push_back({k, "loss", 1.0 / (k + 1), 1.0 * k});
        HP_RETURN_IF_ERROR((*db)->AddMetrics(id, n, pts));
        if (n == kPauseAt) {
          // Hold the write transaction open until the reader has read.
          char c;
          if (write(inside[1], "w", 1) != 1 || read(go[0], &c, 1) != 1) _exit(3);
        }
        return Status::Ok();
      });
      if (!s.ok()) _exit(4);
    }
    _exit(0);
  }
  Storage::Options o;
  o.read_only = true;
  o.busy_timeout_ms = 5000;
  {
    // A read while the writer holds an open transaction: it succeeds at once and sees only
    // what was committed.
    char c;
    ASSERT_EQ(read(inside[0], &c, 1), 1);
    auto reader = OpenStorage(url, o);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    auto trials = (*reader)->ListTrials(id);
    ASSERT_TRUE(trials.ok()) << trials.status().message();
    EXPECT_EQ(trials->size(), static_cast<size_t>(kPauseAt));
    ASSERT_EQ(write(go[1], "g", 1), 1);
  }
  size_t last_seen = 0;
  int status = 0;
  // Read for as long as the writer runs: every read succeeds and never goes backwards, and a
  // trial is never seen without all of its metrics (each transaction is all or nothing).
  while (waitpid(writer, &status, WNOHANG) == 0) {
    auto reader = OpenStorage(url, o);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    auto trials = (*reader)->ListTrials(id);
    ASSERT_TRUE(trials.ok()) << trials.status().message();
    EXPECT_GE(trials->size(), last_seen);
    last_seen = trials->size();
    if (!trials->empty()) {
      auto m = (*reader)->TrialMetrics(id, trials->back().number);
      ASSERT_TRUE(m.ok()) << m.status().message();
      EXPECT_EQ(m->size(), 20u);
    }
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Open()->ListTrials(id)->size(), static_cast<size_t>(kTrials));
}

// A writer process killed with its transaction open: what it committed before stays, what it had
// not committed is gone, and its locks die with it.
TEST_P(StorageContractTest, AWriterKilledMidTransactionLosesOnlyThatTransaction) {
  if (GetParam() == Backend::kMemory)
    GTEST_SKIP() << "a store in one process: none other writes it";
  const std::string url = Url();
  int64_t id;
  {
    auto db = Open();
    id = db->CreateStudy(NewStudy("a"))->id;
    ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0, TrialState::kCompleted)).ok());
    ASSERT_TRUE(db->AddMetrics(id, 0, std::vector<MetricPoint>{{1, "loss", 0.5, 1}}).ok());
  }
  int inside[2];
  ASSERT_EQ(pipe(inside), 0);
  pid_t writer = fork();
  if (writer == 0) {
    auto db = OpenStorage(url);
    if (!db.ok()) _exit(2);
    (void)(*db)->Transaction([&]() -> Status {
      HP_RETURN_IF_ERROR((*db)->InsertTrial(NewTrial(id, 1)));
      std::vector<MetricPoint> pts(500, MetricPoint{1, "loss", 0.1, 1});
      HP_RETURN_IF_ERROR((*db)->AddMetrics(id, 1, pts));
      if (write(inside[1], "w", 1) != 1) _exit(3);
      pause();  // killed here, the transaction open
      return Status::Ok();
    });
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(inside[0], &c, 1), 1);
  kill(writer, SIGKILL);
  int status = 0;
  waitpid(writer, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto db = Open();
  if (GetParam() == Backend::kSqlite) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db->path().c_str(), &raw), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &stmt, nullptr);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "ok");
    sqlite3_finalize(stmt);
    sqlite3_close(raw);
  }

  auto trials = db->ListTrials(id).value();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].number, 0);
  EXPECT_EQ(db->TrialMetrics(id, 0)->size(), 1u);
  // The lock died with the writer: the next write goes through.
  EXPECT_TRUE(db->InsertTrial(NewTrial(id, 1)).ok());
}

// The one codec of a trial's placement: what the controller writes, the reports and a resumed
// controller read back; rows it cannot read give no ranks, never an error.
TEST(StorageTest, PlacementsRoundTripAndMalformedOnesReadAsNone) {
  const std::vector<RankRecord> ranks = {{"node1", {0, 1}, 2}, {"node2", {}, 1}};
  const std::string text = EncodePlacement(ranks);
  EXPECT_EQ(text,
            R"([{"cpus":2,"gpus":[0,1],"host":"node1"},{"cpus":1,"gpus":[],"host":"node2"}])");
  EXPECT_EQ(DecodePlacement(text), ranks);
  EXPECT_EQ(DecodePlacement(EncodePlacement({{"bad\xff", {}, 1}}))[0].host, "bad\xef\xbf\xbd");
  EXPECT_EQ(DecodePlacement(R"([{"host": "n", "cpus": -3}])")[0].cpus, 0);
  for (const char* bad :
       {"", "{", "{}", R"([{"gpus": [0]}])", R"([{"host": "n", "gpus": [0.5]}])",
        R"([{"host": "n"}, 7])", R"([{"host": "n", "gpu_share": "half"}])",
        R"([{"host": "n", "gpu_share": 0}])", R"([{"host": "n", "gpu_share": 1.5}])"})
    EXPECT_TRUE(DecodePlacement(bad).empty()) << bad;
}

// A share of a GPU is stored with its part of the GPU; a row without one (every row before) is
// whole GPUs.
TEST(StorageTest, ASharesPartOfItsGpuIsStoredBesideItsPlacement) {
  const std::vector<RankRecord> shared = {{"node1", {3}, 1, 0.25}};
  const std::string text = EncodePlacement(shared);
  EXPECT_EQ(text, R"([{"cpus":1,"gpu_share":0.25,"gpus":[3],"host":"node1"}])");
  EXPECT_EQ(DecodePlacement(text), shared);
  EXPECT_EQ(DecodePlacement(R"([{"cpus":1,"gpus":[3],"host":"node1"}])")[0].gpu_share, 0);
}

// The codec of a trial's values by metric: non-finite values are left out (JSON has none), no
// values is the empty text an older row holds, and damaged text reads as no values.
TEST(StorageTest, ValuesRoundTripAndDamagedOnesReadAsNone) {
  const std::map<std::string, double> values = {{"acc", 0.9}, {"latency ms", 12}};
  EXPECT_EQ(DecodeValues(EncodeValues(values)), values);
  EXPECT_EQ(EncodeValues({}), "");
  EXPECT_EQ(DecodeValues(EncodeValues({{"a", 1}, {"b", std::nan("")}})),
            (std::map<std::string, double>{{"a", 1}}));
  EXPECT_EQ(DecodeValues(R"({"a": 1, "b": "x", "c": [2]})"),
            (std::map<std::string, double>{{"a", 1}}));
  for (const char* bad : {"", "{", "[1]", "7"}) EXPECT_TRUE(DecodeValues(bad).empty()) << bad;
}

// The codec of a trial's parameters: rows written before it (in the space's order, a structured
// value as JSON) read as it reads its own; a damaged row reads as no parameters, never an error.
TEST(StorageTest, ParamsRoundTripAndEarlierRowsReadTheSame) {
  const Config params = {{"lr", 0.001}, {"arch", R"({"k":[3,5]})"}, {"name", "[not json"}};
  const std::string text = EncodeParams(params);
  EXPECT_EQ(text, R"({"arch":{"k":[3,5]},"lr":0.001,"name":"[not json"})");
  EXPECT_EQ(DecodeParams(text), params);
  EXPECT_EQ(DecodeParams(R"({"lr": 0.001, "name": "[not json", "arch": {"k": [3, 5]}})"), params);
  // A string that is JSON but not as compact as a structured value stays a string.
  const Config spaced = {{"s", "[1, 2]"}};
  EXPECT_EQ(EncodeParams(spaced), R"({"s":"[1, 2]"})");
  EXPECT_EQ(DecodeParams(EncodeParams(spaced)), spaced);
  for (const char* bad : {"", "{", "[1]", R"({"x": null})"}) EXPECT_TRUE(DecodeParams(bad).empty());
}

// Every state once in the order people read them (kPaused is the enum's last), each named so that
// the name reads back.
TEST(StorageTest, TrialStateNamesRoundTrip) {
  std::set<std::string> names;
  for (TrialState s : storage::kTrialStatesForPeople) {
    EXPECT_EQ(ParseTrialState(TrialStateName(s)), s);
    names.insert(TrialStateName(s));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(TrialState::kCancelled) + 1);
  EXPECT_EQ(std::size(storage::kTrialStatesForPeople), names.size());
  EXPECT_FALSE(ParseTrialState("done").has_value());
  EXPECT_TRUE(IsFinished(TrialState::kInfeasible));
  EXPECT_FALSE(IsFinished(TrialState::kInterrupted));
}

JournalEntry Entry(int trial, JournalKind kind, double time, double resource = 0, double value = 0,
                   bool completed = false) {
  JournalEntry e;
  e.trial = trial;
  e.kind = kind;
  e.time = time;
  e.resource = resource;
  e.value = value;
  e.completed = completed;
  return e;
}

// Runs one statement on the file behind Storage's back, to write what Storage would not.
void ExecRaw(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(raw);
}

TEST_P(StorageContractTest, JournalComesBackInTheOrderWrittenWithEveryField) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  int64_t other = db->CreateStudy(NewStudy("b"))->id;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<JournalEntry> first = {
      Entry(3, JournalKind::kBegin, 10),
      Entry(3, JournalKind::kReport, 11, 1, 0.75),
      Entry(3, JournalKind::kReport, 12, 3, nan),
  };
  // A study with several objectives: each one's value as the pruner saw it, a NaN among them.
  first.push_back(Entry(3, JournalKind::kReport, 12.5, 9, 0.5));
  first.back().values = {0.5, nan, -2};
  std::vector<JournalEntry> second = {
      Entry(0, JournalKind::kCannotPause, 13),
      Entry(3, JournalKind::kPromoted, 14, 9),
      Entry(3, JournalKind::kEnd, 15, 0, 0, /*completed=*/true),
      Entry(0, JournalKind::kEnd, 16),
  };
  ASSERT_TRUE(db->AddJournal(id, first).ok());
  // Another study's entries between the two batches are not this study's.
  ASSERT_TRUE(
      db->AddJournal(other, std::vector<JournalEntry>{Entry(1, JournalKind::kBegin, 1)}).ok());
  ASSERT_TRUE(db->AddJournal(id, second).ok());

  auto journal = db->ListJournal(id);
  ASSERT_TRUE(journal.ok()) << journal.status().message();
  std::vector<JournalEntry> written = first;
  written.insert(written.end(), second.begin(), second.end());
  ASSERT_EQ(journal->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    const JournalEntry& got = (*journal)[i];
    const JournalEntry& want = written[i];
    SCOPED_TRACE(::testing::Message() << "entry " << i);
    if (i > 0) {
      EXPECT_GT(got.seq, (*journal)[i - 1].seq);
    }
    EXPECT_EQ(got.trial, want.trial);
    EXPECT_EQ(got.kind, want.kind);
    EXPECT_EQ(got.time, want.time);
    EXPECT_EQ(got.resource, want.resource);
    if (std::isnan(want.value)) {
      EXPECT_TRUE(std::isnan(got.value)) << got.value;
    } else {
      EXPECT_EQ(got.value, want.value);
    }
    EXPECT_EQ(got.completed, want.completed);
    ASSERT_EQ(got.values.size(), want.values.size());
    for (size_t k = 0; k < want.values.size(); ++k)
      EXPECT_TRUE(got.values[k] == want.values[k] ||
                  (std::isnan(got.values[k]) && std::isnan(want.values[k])))
          << k;
  }
  EXPECT_EQ(db->ListJournal(other)->size(), 1u);
}

TEST(StorageTest, JournalReadsANullResourceAsZero) {
  TempDir dir;
  std::string path = dir / "h.db";
  int64_t id = OpenOrDie(path)->CreateStudy(NewStudy("a"))->id;
  ExecRaw(path, StrCat("INSERT INTO journal(study_id, trial, kind, time) VALUES (", id,
                       ", 0, 'begin', 5)"));
  auto journal = OpenOrDie(path)->ListJournal(id);
  ASSERT_TRUE(journal.ok()) << journal.status().message();
  ASSERT_EQ(journal->size(), 1u);
  EXPECT_EQ((*journal)[0].kind, JournalKind::kBegin);
  EXPECT_EQ((*journal)[0].resource, 0.0);
  EXPECT_TRUE(std::isnan((*journal)[0].value));
}

TEST(StorageTest, AJournalRowOfAnUnknownKindIsAnErrorNamingTheStudyAndRow) {
  TempDir dir;
  std::string path = dir / "h.db";
  int64_t id;
  {
    auto db = OpenOrDie(path);
    id = db->CreateStudy(NewStudy("a"))->id;
    ASSERT_TRUE(
        db->AddJournal(id, std::vector<JournalEntry>{Entry(0, JournalKind::kBegin, 1)}).ok());
  }
  ExecRaw(path, StrCat("INSERT INTO journal(id, study_id, trial, kind, time) VALUES (77, ", id,
                       ", 0, 'rewind', 2)"));
  auto journal = OpenOrDie(path)->ListJournal(id);
  ASSERT_FALSE(journal.ok());
  const std::string& message = journal.status().message();
  EXPECT_NE(message.find(StrCat("study ", id)), std::string::npos) << message;
  EXPECT_NE(message.find("row 77"), std::string::npos) << message;
  EXPECT_NE(message.find("'rewind'"), std::string::npos) << message;
}

TEST_P(StorageContractTest, AddJournalInsideAFailedTransactionIsRolledBack) {
  auto db = Open();
  int64_t id = db->CreateStudy(NewStudy("a"))->id;
  ASSERT_TRUE(db->InsertTrial(NewTrial(id, 0)).ok());
  Status s = db->Transaction([&]() -> Status {
    HP_RETURN_IF_ERROR(
        db->AddJournal(id, std::vector<JournalEntry>{Entry(0, JournalKind::kBegin, 1),
                                                     Entry(0, JournalKind::kReport, 2, 1, 0.5)}));
    return db->InsertTrial(NewTrial(id, 0));  // duplicate number: fails
  });
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  auto journal = db->ListJournal(id);
  ASSERT_TRUE(journal.ok()) << journal.status().message();
  EXPECT_TRUE(journal->empty());
  // Outside a transaction the same call commits on its own.
  ASSERT_TRUE(db->AddJournal(id, std::vector<JournalEntry>{Entry(0, JournalKind::kBegin, 1)}).ok());
  EXPECT_EQ(db->ListJournal(id)->size(), 1u);
}

TEST(StorageTest, AVersionOneDatabaseGainsTheJournalOnOpenKeepingItsRows) {
  TempDir dir;
  std::string path = dir / "h.db";
  ASSERT_EQ(DefaultMigrations().front().version, 1);
  std::vector<Migration> v1 = {DefaultMigrations().front()};
  int64_t id;
  {
    Storage::Options o;
    o.migrations = &v1;
    auto db = OpenOrDie(path, o);
    ASSERT_EQ(db->schema_version(), 1);
    id = db->CreateStudy(NewStudy("a"))->id;
    // Today's InsertTrial writes columns version 1 lacks: the row as version 1 wrote it.
    EXPECT_FALSE(db->InsertTrial(NewTrial(id, 0, TrialState::kCompleted)).ok());
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    const std::string insert = "INSERT INTO trials(study_id, number, state, params) VALUES (" +
                               std::to_string(id) + R"(, 0, 'completed', '{"x": 1}'))";
    EXPECT_EQ(sqlite3_exec(raw, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
    ASSERT_TRUE(db->AddMetrics(id, 0, std::vector<MetricPoint>{{1, "loss", 0.5, 1}}).ok());
    ASSERT_TRUE(db->AddEvent(id, {3, 0, "trial_finished", "completed"}).ok());
    // Version 1 has no journal.
    EXPECT_FALSE(
        db->AddJournal(id, std::vector<JournalEntry>{Entry(0, JournalKind::kBegin, 1)}).ok());
  }
  auto db = OpenOrDie(path);
  EXPECT_EQ(db->schema_version(), DefaultMigrations().back().version);
  auto trials = db->ListTrials(id).value();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  EXPECT_TRUE(trials[0].placement.empty());  // not recorded then
  EXPECT_EQ(trials[0].params, (Config{{"x", int64_t{1}}}));
  EXPECT_EQ(db->TrialMetrics(id, 0)->size(), 1u);
  auto events = db->ListEvents(id, 10).value();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "trial_finished");
  ASSERT_TRUE(
      db->AddJournal(id, std::vector<JournalEntry>{Entry(0, JournalKind::kEnd, 4, 0, 0, true)})
          .ok());
  auto journal = db->ListJournal(id).value();
  ASSERT_EQ(journal.size(), 1u);
  EXPECT_EQ(journal[0].kind, JournalKind::kEnd);
  EXPECT_TRUE(journal[0].completed);
}

TEST_P(StorageContractTest, SubmissionsKeepTheirOrderStateAndEnd) {
  auto db = Open();
  SubmissionRecord a;
  a.study_name = "a";
  a.spec_text = "name: a\n";
  a.spec_path = "/x/a.yaml";
  a.max_trials = 7;
  a.submitted = 5;
  SubmissionRecord b = a;
  b.study_name = "b";
  b.max_trials.reset();
  b.max_parallel = 3;
  const int64_t ia = db->AddSubmission(a).value();
  const int64_t ib = db->AddSubmission(b).value();
  EXPECT_LT(ia, ib);
  ASSERT_TRUE(db->SetSubmissionState(ia, SubmissionState::kRunning).ok());
  ASSERT_TRUE(db->SetSubmissionState(ib, SubmissionState::kDone, 2, "bad").ok());
  EXPECT_EQ(db->SetSubmissionState(ib + 1, SubmissionState::kDone).code(), StatusCode::kNotFound);

  auto all = db->ListSubmissions().value();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].study_name, "a");
  EXPECT_EQ(all[0].state, SubmissionState::kRunning);
  EXPECT_EQ(all[0].max_trials, 7);
  EXPECT_FALSE(all[0].max_parallel.has_value());
  EXPECT_EQ(all[0].spec_text, "name: a\n");
  EXPECT_EQ(all[0].spec_path, "/x/a.yaml");
  EXPECT_EQ(all[1].state, SubmissionState::kDone);
  EXPECT_EQ(all[1].exit_code, 2);
  EXPECT_EQ(all[1].message, "bad");
  EXPECT_EQ(all[1].max_parallel, 3);
  auto open = db->ListSubmissions({SubmissionState::kQueued, SubmissionState::kRunning}).value();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].id, ia);
}

TEST_P(StorageContractTest, ControlsWaitUntilCarriedOutAndKeepTheirArguments) {
  auto db = Open();
  const int64_t id = db->CreateStudy(NewStudy("a"))->id;
  ControlRecord update;
  update.kind = ControlKind::kUpdate;
  update.max_trials = 40;
  update.time_limit_s = 90.5;
  update.created = 10;
  ControlRecord enqueue;
  enqueue.kind = ControlKind::kEnqueue;
  enqueue.trials = {{{{"lr", 0.01}, {"opt", "adam"}}, std::nullopt, 3},
                    {{{"lr", 0.1}, {"layers", int64_t{2}}}, 0.25, std::nullopt}};
  const int64_t first = db->AddControl(id, update).value();
  const int64_t second = db->AddControl(id, enqueue).value();
  EXPECT_LT(first, second);
  EXPECT_EQ(db->AddControl(id + 100, update).status().code(), StatusCode::kNotFound);

  auto pending = db->ListControls(id, /*pending_only=*/true).value();
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].kind, ControlKind::kUpdate);
  EXPECT_EQ(pending[0].max_trials, 40);
  EXPECT_FALSE(pending[0].max_parallel.has_value());
  EXPECT_DOUBLE_EQ(pending[0].time_limit_s.value_or(0), 90.5);
  EXPECT_DOUBLE_EQ(pending[0].created, 10);
  EXPECT_EQ(pending[1].trials, enqueue.trials);
  EXPECT_FALSE(pending[1].applied.has_value());

  ASSERT_TRUE(db->FinishControl(first, 12, /*refused=*/true, "max_trials below done").ok());
  // A second taker of the same control is told it is gone.
  EXPECT_EQ(db->FinishControl(first, 13, false, "again").code(), StatusCode::kNotFound);
  pending = db->ListControls(id, true).value();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, second);
  auto all = db->ListControls(id, false).value();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[0].applied.value_or(0), 12);
  EXPECT_TRUE(all[0].refused);
  EXPECT_EQ(all[0].outcome, "max_trials below done");
}

// The tuner's state (Tuner::SaveState) a study keeps for its next ask: none at first, the last one
// set after that, each study its own, and a state rolled back with its transaction.
TEST_P(StorageContractTest, AStudyKeepsTheLastTunerStateSetForIt) {
  auto db = Open();
  const int64_t a = db->CreateStudy(NewStudy("a"))->id;
  const int64_t b = db->CreateStudy(NewStudy("b"))->id;
  EXPECT_EQ(*db->TunerState(a), "");
  ASSERT_TRUE(db->SetTunerState(a, "gp1 0 2 0 12 1 2 3").ok());
  ASSERT_TRUE(db->SetTunerState(a, "gp1 1 2 0 40 4 5 6").ok());
  ASSERT_TRUE(db->SetTunerState(b, "other").ok());
  EXPECT_EQ(*db->TunerState(a), "gp1 1 2 0 40 4 5 6");
  EXPECT_EQ(*db->TunerState(b), "other");
  Status failed = db->Transaction([&]() -> Status {
    HP_RETURN_IF_ERROR(db->SetTunerState(a, "lost"));
    return Status::Internal("rolled back");
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(*db->TunerState(a), "gp1 1 2 0 40 4 5 6");
}

TEST_P(StorageContractTest, DeletingAStudyRemovesEverythingItHeldAndNothingElse) {
  auto db = Open();
  const int64_t gone = db->CreateStudy(NewStudy("gone"))->id;
  const int64_t kept = db->CreateStudy(NewStudy("kept"))->id;
  for (int64_t study : {gone, kept}) {
    ASSERT_TRUE(db->InsertTrial(NewTrial(study, 0)).ok());
    std::vector<MetricPoint> points = {{1, "loss", 0.5, 3000}};
    ASSERT_TRUE(db->AddMetrics(study, 0, points).ok());
    ASSERT_TRUE(db->AddEvent(study, {1, 0, "trial_started", "x"}).ok());
    JournalEntry entry;
    entry.kind = JournalKind::kBegin;
    ASSERT_TRUE(db->AddJournal(study, std::span(&entry, 1)).ok());
    ControlRecord stop;
    ASSERT_TRUE(db->AddControl(study, stop).ok());
    ASSERT_TRUE(db->SetTunerState(study, "gp1 state").ok());
  }
  ASSERT_TRUE(db->DeleteStudy(gone).ok());
  EXPECT_EQ(db->DeleteStudy(gone).code(), StatusCode::kNotFound);
  EXPECT_FALSE(db->FindStudy("gone")->has_value());
  EXPECT_TRUE(db->ListTrials(gone)->empty());
  EXPECT_TRUE(db->ListEvents(gone, 10)->empty());
  EXPECT_TRUE(db->ListJournal(gone)->empty());
  EXPECT_TRUE(db->ListControls(gone, false)->empty());
  EXPECT_EQ(*db->TunerState(gone), "");
  // The other study is whole, and the name can be used again.
  EXPECT_EQ(db->ListTrials(kept)->size(), 1u);
  EXPECT_EQ(db->TrialMetrics(kept, 0)->size(), 1u);
  EXPECT_EQ(db->ListEvents(kept, 10)->size(), 1u);
  EXPECT_EQ(db->ListJournal(kept)->size(), 1u);
  EXPECT_EQ(db->ListControls(kept, true)->size(), 1u);
  EXPECT_EQ(*db->TunerState(kept), "gp1 state");
  auto again = db->CreateStudy(NewStudy("gone"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_NE(again->id, gone);
}

TEST(StorageTest, ControlKindNamesAndTheCancelledStateArePinned) {
  const std::vector<std::pair<ControlKind, std::string>> kinds = {
      {ControlKind::kStop, "stop"},
      {ControlKind::kCancel, "cancel"},
      {ControlKind::kPause, "pause"},
      {ControlKind::kResume, "resume"},
      {ControlKind::kUpdate, "update"},
      {ControlKind::kEnqueue, "enqueue"},
      {ControlKind::kAddResults, "add_results"}};
  for (const auto& [kind, name] : kinds) {
    EXPECT_EQ(ControlKindName(kind), name);
    EXPECT_EQ(ParseControlKind(name), kind);
  }
  EXPECT_FALSE(ParseControlKind("Stop").has_value());
  EXPECT_STREQ(TrialStateName(TrialState::kCancelled), "cancelled");
  EXPECT_EQ(ParseTrialState("cancelled"), TrialState::kCancelled);
  EXPECT_TRUE(IsFinished(TrialState::kCancelled));
  // Arguments that are not a JSON object read as none, not as an error.
  ControlRecord c;
  DecodeControlArgs("not json", &c);
  DecodeControlArgs(R"({"trials": [{"params": 3}, 7], "max_trials": "x"})", &c);
  EXPECT_TRUE(c.trials.empty());
  EXPECT_FALSE(c.max_trials.has_value());
}

// A control's arguments: what storage keeps and a client sends, one codec for both.
TEST(StorageTest, AControlsArgumentsRoundTripAndAWrongTypeIsRefusedByName) {
  ControlArgs args;
  args.max_trials = 40;
  args.time_limit_s = 5400;
  args.trials = {{Config{{"lr", 0.01}}, std::nullopt, 3},
                 {Config{{"lr", 0.1}}, 0.42, std::nullopt}};
  const std::string text = EncodeControlArgs(args);
  EXPECT_EQ(ParseControlArgs(text).value(), args);
  EXPECT_EQ(ParseControlArgs("{}").value(), ControlArgs{});
  // Keys beside the arguments (a request's verb) are left alone.
  EXPECT_EQ(ParseControlArgs(R"({"verb": "update", "priority": 2})").value().priority, 2.0);
  for (const auto& [bad, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"max_trials": "x"})", "max_trials"},
           {R"({"max_parallel": 1.5})", "max_parallel"},
           {R"({"max_trials": 4294967297})", "max_trials"},
           {R"({"trials": {}})", "trials"},
           {R"({"trials": [{"params": 3}]})", "params"},
           {R"({"trials": [{"params": "{}", "value": "high"}]})", "value"}}) {
    auto parsed = ParseControlArgs(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(field), std::string::npos)
        << bad << ": " << parsed.status().message();
  }
}

TEST(StorageTest, JournalAndEventKindNamesRoundTripAndUnknownNamesDoNot) {
  // The names are what the database holds, so they are pinned here, not only round-tripped.
  const std::vector<std::pair<JournalKind, std::string>> journal_kinds = {
      {JournalKind::kBegin, "begin"},
      {JournalKind::kReport, "report"},
      {JournalKind::kCannotPause, "cannot_pause"},
      {JournalKind::kPromoted, "promoted"},
      {JournalKind::kEnd, "end"},
      {JournalKind::kFinalist, "finalist"}};
  for (const auto& [kind, name] : journal_kinds) {
    EXPECT_EQ(JournalKindName(kind), name);
    EXPECT_EQ(ParseJournalKind(JournalKindName(kind)), kind) << name;
  }
  const std::vector<std::pair<EventKind, std::string>> event_kinds = {
      {EventKind::kRunStarted, "run_started"},
      {EventKind::kRunResumed, "run_resumed"},
      {EventKind::kRunStopped, "run_stopped"},
      {EventKind::kTrialStarted, "trial_started"},
      {EventKind::kTrialResumed, "trial_resumed"},
      {EventKind::kTrialFinished, "trial_finished"},
      {EventKind::kTrialPaused, "trial_paused"},
      {EventKind::kTimeLimit, "time_limit"},
      {EventKind::kPruning, "pruning"},
      {EventKind::kPausing, "pausing"},
      {EventKind::kCannotPause, "cannot_pause"},
      {EventKind::kPromoted, "promoted"},
      {EventKind::kTrialRunning, "trial_running"},
      {EventKind::kPreempted, "preempted"},
      {EventKind::kShare, "share"},
      {EventKind::kControl, "control"},
      {EventKind::kFinalist, "finalist"}};
  for (const auto& [kind, name] : event_kinds) {
    EXPECT_EQ(EventKindName(kind), name);
    EXPECT_EQ(ParseEventKind(EventKindName(kind)), kind) << name;
  }
  EXPECT_FALSE(ParseJournalKind("rewind").has_value());
  EXPECT_FALSE(ParseJournalKind("").has_value());
  EXPECT_FALSE(ParseJournalKind("Begin").has_value());
  EXPECT_FALSE(ParseEventKind("trial_exploded").has_value());
  EXPECT_FALSE(ParseEventKind("").has_value());
}

// ---- The schema's one chain (storage/src/schema.h) against the steps as released ----------------

// A backend's steps as released (tests/fixtures/schema/BACKEND_released.sql), by version.
std::map<int, std::string> ReleasedSteps(const std::string& backend) {
  std::istringstream in(ReadFile(std::string(HYPERPACK_SOURCE_DIR) + "/tests/fixtures/schema/" +
                                 backend + "_released.sql"));
  std::map<int, std::string> steps;
  int version = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("-- version ", 0) == 0) {
      version = std::stoi(line.substr(11));
    } else if (version > 0) {
      steps[version] += line + "\n";
    }
  }
  return steps;
}

std::string Trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \n");
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(" \n") - first + 1);
}

// Each record's table (rows.h) reads every column its SQL table has, but for the row's own key and
// its parent's, which storage sets: a column added to the schema and not to its record's table,
// or the other way round, fails here.
template <class R>
void ExpectTheSchemasColumns(sqlite3* db, const Table<R>& table) {
  std::set<std::string> schema;
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, ("PRAGMA table_info(" + table.name() + ")").c_str(), -1, &stmt,
                               nullptr),
            SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW)
    schema.insert(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)));
  sqlite3_finalize(stmt);
  std::set<std::string> read = {"id"};
  if (!table.parent().empty()) read.insert(table.parent());
  std::stringstream names(table.names());
  for (std::string name; std::getline(names >> std::ws, name, ',');) read.insert(name);
  EXPECT_EQ(read, schema) << table.name();
}

TEST(StorageTest, EachRecordsTableReadsEveryColumnItsSqlTableHas) {
  TempDir dir;
  const std::string path = (dir.path() / "s.db").string();
  ASSERT_TRUE(OpenStorage(path).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ExpectTheSchemasColumns(db, TrialTable());
  ExpectTheSchemasColumns(db, StudyTable());
  ExpectTheSchemasColumns(db, EventTable());
  ExpectTheSchemasColumns(db, JournalTable());
  ExpectTheSchemasColumns(db, SubmissionTable());
  ExpectTheSchemasColumns(db, ControlTable());
  sqlite3_close(db);
}

TEST(StorageTest, SqlitesSchemaStepsAreTheReleasedOnesWordForWord) {
  const std::map<int, std::string> released = ReleasedSteps("sqlite");
  ASSERT_EQ(released.size(), DefaultMigrations().size());
  for (const Migration& m : DefaultMigrations()) {
    ASSERT_TRUE(released.count(m.version)) << m.version;
    EXPECT_EQ(Trimmed(m.sql), Trimmed(released.at(m.version))) << "version " << m.version;
  }
}

// A database made by the released steps up to each earlier version, with a study, a trial, a
// metric and an event written as that version could, opens at today's version with every row.
TEST(StorageTest, ADatabaseOfEveryEarlierSchemaVersionOpensAndUpgradesKeepingItsRows) {
  const std::map<int, std::string> released = ReleasedSteps("sqlite");
  const int latest = DefaultMigrations().back().version;
  for (int version = 1; version < latest; ++version) {
    SCOPED_TRACE("schema version " + std::to_string(version));
    TempDir dir;
    const std::string path = dir / "h.db";
    std::vector<Migration> as_released;
    for (int v = 1; v <= version; ++v) as_released.push_back({v, released.at(v)});
    int64_t id = 0;
    {
      Storage::Options o;
      o.migrations = &as_released;
      auto db = OpenOrDie(path, o);
      ASSERT_EQ(db->schema_version(), version);
      id = db->CreateStudy(NewStudy("a"))->id;
      sqlite3* raw = nullptr;
      ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
      const std::string insert = "INSERT INTO trials(study_id, number, state, params) VALUES (" +
                                 std::to_string(id) + R"(, 0, 'completed', '{"x": 1}'))";
      EXPECT_EQ(sqlite3_exec(raw, insert.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
      sqlite3_close(raw);
      ASSERT_TRUE(db->AddMetrics(id, 0, std::vector<MetricPoint>{{1, "loss", 0.5, 1}}).ok());
      ASSERT_TRUE(db->AddEvent(id, {3, 0, "trial_finished", "completed"}).ok());
    }
    auto db = OpenOrDie(path);
    EXPECT_EQ(db->schema_version(), latest);
    auto trials = db->ListTrials(id).value();
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_EQ(trials[0].params, (Config{{"x", int64_t{1}}}));
    EXPECT_EQ(db->TrialMetrics(id, 0)->size(), 1u);
    EXPECT_EQ(db->ListEvents(id, 10)->size(), 1u);
    // Today's writes work on it.
    EXPECT_TRUE(db->InsertTrial(NewTrial(id, 1, TrialState::kCompleted)).ok());
  }
}

#ifdef HYPERPACK_WITH_POSTGRES
// PostgreSQL's released chain began at version 4 (SQLite's first four at once); it now follows the
// same chain from version 1. A database the chain makes has the tables, columns, keys and indexes
// that the released chain made; and a database of every released version opens and upgrades.
TEST(PostgresStorageTest, TheOneChainMakesWhatTheReleasedOneMadeAndEveryReleasedVersionUpgrades) {
  std::string error;
  auto server = LocalPostgres::Start(&error);
  if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(server, nullptr) << error;
  const std::map<int, std::string> released = ReleasedSteps("postgres");
  const int latest = DefaultMigrations().back().version;
  ASSERT_EQ(released.rbegin()->first, latest);
  // A database at `version` as the released steps made it.
  auto made_as_released = [&](const std::string& name, int version) {
    ASSERT_FALSE(server->NewDatabase(name, &error).empty()) << error;
    ASSERT_EQ(server->Sql(name, "CREATE TABLE schema_version (version INTEGER NOT NULL)").exit_code,
              0);
    for (const auto& [v, step] : released) {
      if (v > version) break;
      auto ran =
          server->Sql(name, step + "INSERT INTO schema_version VALUES (" + std::to_string(v) + ")");
      ASSERT_EQ(ran.exit_code, 0) << ran.err;
    }
  };
  made_as_released("released", latest);
  const std::string chain_url = server->NewDatabase("chain", &error);
  ASSERT_FALSE(chain_url.empty()) << error;
  EXPECT_EQ(OpenOrDie(chain_url)->schema_version(), latest);
  for (const char* what :
       {"SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, ''), "
        "is_identity FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = "
        "'public'::regnamespace ORDER BY 1"}) {
    auto chain = server->Sql("chain", what);
    ASSERT_EQ(chain.exit_code, 0) << chain.err;
    EXPECT_FALSE(chain.out.empty());
    EXPECT_EQ(chain.out, server->Sql("released", what).out) << what;
  }
  for (const auto& [version, step] : released) {
    if (version == latest) break;
    SCOPED_TRACE("released version " + std::to_string(version));
    const std::string name = "v" + std::to_string(version);
    made_as_released(name, version);
    ASSERT_EQ(server
                  ->Sql(name,
                        "INSERT INTO studies(name, spec_text, direction, metric, seed, created) "
                        "VALUES ('a', '', 'minimize', 'loss', 1, 0);"
                        "INSERT INTO trials(study_id, number, state, params) VALUES "
                        "((SELECT id FROM studies), 0, 'completed', '{\"x\": 1}')")
                  .exit_code,
              0);
    auto db = OpenOrDie("postgresql://hp@127.0.0.1:" + std::to_string(server->port()) + "/" + name);
    EXPECT_EQ(db->schema_version(), latest);
    auto study = db->FindStudy("a").value();
    ASSERT_TRUE(study.has_value());
    auto trials = db->ListTrials(study->id).value();
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_EQ(trials[0].params, (Config{{"x", int64_t{1}}}));
    EXPECT_TRUE(db->InsertTrial(NewTrial(study->id, 1, TrialState::kCompleted)).ok());
  }
}
#endif

}  // namespace
}  // namespace hyperpack::storage
