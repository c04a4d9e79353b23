// Storage: a study's whole history behind one interface, with backends chosen by URL (OpenStorage):
// SQLite, the embedded default; PostgreSQL, for a team's shared database; and a process's memory.
// What it stores, as plain records, is in records.h, which links nothing that does I/O; no
// backend's library is seen through this header.
//
// The contract every backend keeps (tests/storage_test.cc runs one suite over each):
// - Writes are atomic: each call is one transaction, or joins the one Transaction() has open;
//   a transaction whose body fails leaves nothing of itself behind.
// - What a committed write wrote is what every later read, from any handle on the same store,
//   gets back: the same records, in the orders each method states.
// - Errors: kNotFound for a study, trial or submission that is not there (as each method says);
//   kAlreadyExists for a name or number taken; kFailedPrecondition for a store this hyperpack
//   cannot read (a newer schema), left untouched; kIo when the backend itself fails.
// Thread-safety: a Storage handle is used by one thread at a time; open one per thread or
// process. Handles on the same store may be used from different threads or processes at once.
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

  // OpenStorage(url, options): kept for the callers that say Storage::Open.
  static Result<std::unique_ptr<Storage>> Open(const std::string& url, const Options& options);
  static Result<std::unique_ptr<Storage>> Open(const std::string& url) {
    return Open(url, Options());
  }
  virtual ~Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Where the store is, as it was given: what messages name.
  virtual const std::string& path() const = 0;
  virtual int schema_version() const = 0;

  // Runs `body` in one transaction: committed when it returns OK, rolled back otherwise. The
  // single-call writes below join an enclosing transaction instead of starting their own.
  virtual Status Transaction(const std::function<Status()>& body) = 0;

  // Takes the store's leader lease for this handle unless another handle holds it: true when this
  // handle holds it, from then until it is closed or its process dies (PostgreSQL: a session
  // advisory lock; SQLite: a lock on the file beside the database; memory: the store's flag). Two
  // `hyperpack serve` on one store run one at a time: the other waits as a standby.
  virtual Result<bool> TryLead() = 0;

  // ---- studies ----
  // Fails with kAlreadyExists when the name is taken; the record returned carries its new id.
  virtual Result<StudyRecord> CreateStudy(const StudyRecord& study) = 0;
  virtual Result<std::optional<StudyRecord>> FindStudy(const std::string& name) = 0;
  // Every study, by id (the order they were created).
  virtual Result<std::vector<StudyRecord>> ListStudies() = 0;
  // Records which process runs the study; clears it when pid is nullopt.
  virtual Status SetRunner(int64_t study_id, std::optional<int64_t> pid,
                           const std::string& host) = 0;

  // ---- trials ----
  // kAlreadyExists when the study has a trial of that number.
  virtual Status InsertTrial(const TrialRecord& trial) = 0;
  // Writes state, value, end time, exit status and error of a trial that ended; kNotFound when
  // there is no such trial.
  virtual Status FinishTrial(const TrialRecord& trial) = 0;
  // A paused trial runs again (promoted), placed at `placement`: its state becomes running
  // and its end, exit status and error are cleared. NotFound when the trial is not paused.
  virtual Status ResumeTrial(int64_t study_id, int number,
                             const std::vector<RankRecord>& placement) = 0;
  // Sets a running trial's heartbeat to `now`; false when no running trial has that number.
  virtual Result<bool> Heartbeat(int64_t study_id, int number, double now) = 0;
  // Marks every running or pending trial of the study interrupted (its end `now` unless it has
  // one, its error `reason`); returns their numbers, ascending.
  virtual Result<std::vector<int>> InterruptUnfinished(int64_t study_id, double now,
                                                       const std::string& reason) = 0;
  // The study's trials by number.
  virtual Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) = 0;
  // Its trials in one of `states`, by number.
  virtual Result<std::vector<TrialRecord>> ListTrialsIn(int64_t study_id,
                                                        std::span<const TrialState> states) = 0;
  // Its completed trials with a value (not NaN), best first for `direction` (ties: the lower
  // number), none worse than `bound` where given, at most `limit` of them (every one when
  // negative).
  virtual Result<std::vector<TrialRecord>> BestTrials(int64_t study_id, Direction direction,
                                                      std::optional<double> bound, int limit) = 0;
  // Its trials counted by state, and when they ran (TallyOf its trials), from one aggregate
  // query: `status` answers from this and the two above without reading every trial.
  virtual Result<TrialTally> TallyTrials(int64_t study_id) = 0;
  // Inside a transaction: waits until no other transaction holds the study's lock, then holds it
  // until this one ends. A writer that reads, decides and writes (an ask, whose proposal must see
  // every trial asked before it) takes it first. SQLite and the memory store run one writing
  // transaction at a time already; PostgreSQL runs them side by side.
  virtual Status LockStudy(int64_t study_id) = 0;
  // One more than the highest trial number; 0 for a study without trials.
  virtual Result<int> NextTrialNumber(int64_t study_id) = 0;

  // ---- the tuner's state ----
  // What a study's tuner learnt beyond its trials (tuner::Tuner::SaveState), kept so that the
  // next `hyperpack ask` starts from it; "" where none is kept. Removed with the study.
  virtual Result<std::string> TunerState(int64_t study_id) = 0;
  virtual Status SetTunerState(int64_t study_id, const std::string& state) = 0;

  // ---- metrics and events ----
  // kNotFound when the trial is not there.
  virtual Status AddMetrics(int64_t study_id, int trial_number,
                            std::span<const MetricPoint> points) = 0;
  // A trial's points in the order written.
  virtual Result<std::vector<MetricPoint>> TrialMetrics(int64_t study_id, int trial_number) = 0;
  // The point of metric `name` written last for the trial; nullopt when it has none. One row read,
  // however many the trial wrote (`status --watch` asks it of every running trial).
  virtual Result<std::optional<MetricPoint>> LatestMetric(int64_t study_id, int trial_number,
                                                          const std::string& name) = 0;
  virtual Status AddEvent(int64_t study_id, const EventRecord& event) = 0;
  // The newest `limit` events, oldest first.
  virtual Result<std::vector<EventRecord>> ListEvents(int64_t study_id, int limit) = 0;
  // Every event of these kinds, oldest first (a study's pauses and resumes without the rest).
  virtual Result<std::vector<EventRecord>> ListEventsOfKinds(int64_t study_id,
                                                             std::span<const EventKind> kinds) = 0;

  // ---- the journal ----
  virtual Status AddJournal(int64_t study_id, std::span<const JournalEntry> entries) = 0;
  // Every entry of the study, in the order written (seq ascending).
  virtual Result<std::vector<JournalEntry>> ListJournal(int64_t study_id) = 0;

  // ---- controls: what was asked of a study from outside its runner (records.h) ----
  // Stores a control (its id, applied, refused and outcome are ignored) and returns its id;
  // kNotFound when there is no such study.
  virtual Result<int64_t> AddControl(int64_t study_id, const ControlRecord& control) = 0;
  // The study's controls by id: only those not carried out yet, or every one.
  virtual Result<std::vector<ControlRecord>> ListControls(int64_t study_id, bool pending_only) = 0;
  // Marks a control carried out (or refused) with what came of it; kNotFound when there is no such
  // control still pending (two takers of one control: the second is told so).
  virtual Status FinishControl(int64_t id, double applied, bool refused,
                               const std::string& outcome) = 0;
  // Removes the study and everything it holds: trials, metrics, events, journal, controls, the
  // tuner's state.
  // kNotFound when there is no such study.
  virtual Status DeleteStudy(int64_t study_id) = 0;

  // ---- the server's submissions ----
  // Stores a new submission (its id is ignored) and returns its id.
  virtual Result<int64_t> AddSubmission(const SubmissionRecord& submission) = 0;
  // Sets a submission's state, and its exit code and message (kept only for kDone); kNotFound
  // for an unknown id.
  virtual Status SetSubmissionState(int64_t id, SubmissionState state, int exit_code = 0,
                                    const std::string& message = "") = 0;
  // Those in `states`, oldest first; every one when `states` is empty.
  virtual Result<std::vector<SubmissionRecord>> ListSubmissions(
      std::vector<SubmissionState> states = {}) = 0;

 protected:
  Storage() = default;
};

// The store at `url`:
//   PATH or sqlite:///PATH  the SQLite file at PATH (created unless read_only), the default;
//   postgresql://USER@HOST:PORT/DB (or postgres://) a PostgreSQL database, as libpq reads the URL;
//                           path() shows it without its password
//   memory:                 a fresh store in this process's memory, gone with its last handle;
//   memory://NAME           the store NAME in this process's memory, shared by every handle
//                           opened on it while one is open (a read_only open of one that is not
//                           open is kNotFound, as for a missing file).
// Any other scheme (mysql://) is kInvalidArgument naming the ones there are.
// The file the store at `url` keeps its data in: PATH for a path or sqlite:///PATH; nullopt for a
// server's database or a memory store (what sits "next to the storage" then goes in the current
// folder).
std::optional<std::string> StorageFile(const std::string& url);

Result<std::unique_ptr<Storage>> OpenStorage(const std::string& url,
                                             const Storage::Options& options = {});

// Whether the runner `study` records still runs it: one on this host while its process lives, one
// on another host (or a server's) taken at its word. False when none is recorded.
bool RunnerAlive(const StudyRecord& study);

}  // namespace hyperpack::storage
