// Storage: a study's whole history in one SQLite file.
// (What it stores, as plain records, is in records.h, which links nothing that does I/O.)
//
// Schema (v2): studies, trials, metrics (intermediate values), events, the journal (v2: what each
// study's controller fed its pruner, so a resume can replay it), and schema_version. Writes
// run in transactions (one per call, or one around a batch with Transaction()); the database is in
// WAL mode with a busy timeout, so other processes can read (`hyperpack status`) while a run
// writes. Opening a database applies any forward migrations it lacks; a database written by a newer
// hyperpack is refused, untouched.
//
// Thread-safety: a Storage is one SQLite connection and must be used by one thread at a time.
// Open one per thread or process. The connection is defined in storage.cc, so that code including
// this header sees nothing of SQLite.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/records.h"

namespace hyperpack::storage {

// One forward step of the schema: brings a database from version - 1 to version.
struct Migration {
  int version;
  std::string sql;
};
// The schema's history, oldest first. The last entry's version is the current schema.
const std::vector<Migration>& DefaultMigrations();

class Storage {
 public:
  struct Options {
    bool read_only = false;  // for readers (`hyperpack status`): no migrations, no writes
    int busy_timeout_ms = 10000;
    // Tests pass their own list to exercise migrations; everyone else keeps the default.
    const std::vector<Migration>* migrations = nullptr;
  };

  // Opens (creating when absent and not read_only) the database at `path`.
  static Result<std::unique_ptr<Storage>> Open(const std::string& path, const Options& options);
  static Result<std::unique_ptr<Storage>> Open(const std::string& path) {
    return Open(path, Options());
  }
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  const std::string& path() const;
  int schema_version() const;

  // Runs `body` in one transaction: committed when it returns OK, rolled back otherwise. The
  // single-call writes below join an enclosing transaction instead of starting their own.
  Status Transaction(const std::function<Status()>& body);

  // ---- studies ----
  // Fails with kAlreadyExists when the name is taken.
  Result<StudyRecord> CreateStudy(const StudyRecord& study);
  Result<std::optional<StudyRecord>> FindStudy(const std::string& name);
  Result<std::vector<StudyRecord>> ListStudies();
  // Records which process runs the study; clears it when pid is nullopt.
  Status SetRunner(int64_t study_id, std::optional<int64_t> pid, const std::string& host);

  // ---- trials ----
  Status InsertTrial(const TrialRecord& trial);
  // Writes state, value, end time, exit status and error of a trial that ended.
  Status FinishTrial(const TrialRecord& trial);
  // A paused trial runs again (promoted), placed at `placement_json`: its state becomes running
  // and its end, exit status and error are cleared. NotFound when the trial is not paused.
  Status ResumeTrial(int64_t study_id, int number, const std::string& placement_json);
  // Marks every running or pending trial of the study interrupted; returns their numbers.
  Result<std::vector<int>> InterruptUnfinished(int64_t study_id, double now,
                                               const std::string& reason);
  Result<std::vector<TrialRecord>> ListTrials(int64_t study_id);
  Result<int> NextTrialNumber(int64_t study_id);

  // ---- metrics and events ----
  Status AddMetrics(int64_t study_id, int trial_number, std::span<const MetricPoint> points);
  Result<std::vector<MetricPoint>> TrialMetrics(int64_t study_id, int trial_number);
  Status AddEvent(int64_t study_id, const EventRecord& event);
  // The newest `limit` events, oldest first.
  Result<std::vector<EventRecord>> ListEvents(int64_t study_id, int limit);
  // Every event of these kinds, oldest first (a study's pauses and resumes without the rest).
  Result<std::vector<EventRecord>> ListEventsOfKinds(int64_t study_id,
                                                     std::span<const EventKind> kinds);

  // ---- the journal ----
  Status AddJournal(int64_t study_id, std::span<const JournalEntry> entries);
  // Every entry of the study, in the order written (seq ascending).
  Result<std::vector<JournalEntry>> ListJournal(int64_t study_id);

  // ---- the server's submissions ----
  // Stores a new submission (its id is ignored) and returns its id.
  Result<int64_t> AddSubmission(const SubmissionRecord& submission);
  // Sets a submission's state, and its exit code and message (kept only for kDone).
  Status SetSubmissionState(int64_t id, SubmissionState state, int exit_code = 0,
                            const std::string& message = "");
  // Those in `states`, oldest first; every one when `states` is empty.
  Result<std::vector<SubmissionRecord>> ListSubmissions(std::vector<SubmissionState> states = {});

 private:
  class Connection;
  explicit Storage(std::unique_ptr<Connection> db);

  std::unique_ptr<Connection> db_;
};

}  // namespace hyperpack::storage
