// The SQLite backend of Storage (storage.h): one file, in WAL mode with a busy timeout so that
// other processes read (`hyperpack status`) while a run writes.
//
// Schema (v7): studies, trials (v4: where their ranks ran; v6: values by metric), metrics
// (intermediate values), events, the journal (v2: what each study's controller fed its pruner, so
// a resume can replay it), submissions (v3: the server's), controls (v5), tuner_states (v7: what
// a study's tuner learnt, for the next ask) and schema_version. Opening a database applies any
// forward migrations it lacks; a database written by a newer hyperpack is refused, untouched.
// Thread-safety: one SQLite connection per handle (Storage's contract).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hyperpack/storage/storage.h"

namespace hyperpack::storage {

// Opens (creating when absent and not read_only) the database at `path`.
Result<std::unique_ptr<Storage>> OpenSqlite(const std::string& path,
                                            const Storage::Options& options);

class SqliteStorage final : public Storage {
 public:
  ~SqliteStorage() override;

  const std::string& path() const override;
  int schema_version() const override;
  Status Transaction(const std::function<Status()>& body) override;
  Result<bool> TryLead() override;

  Result<StudyRecord> CreateStudy(const StudyRecord& study) override;
  Result<std::optional<StudyRecord>> FindStudy(const std::string& name) override;
  Result<std::vector<StudyRecord>> ListStudies() override;
  Status SetRunner(int64_t study_id, std::optional<int64_t> pid, const std::string& host) override;

  Status InsertTrial(const TrialRecord& trial) override;
  Status FinishTrial(const TrialRecord& trial) override;
  Result<bool> Heartbeat(int64_t study_id, int number, double now) override;
  Status ResumeTrial(int64_t study_id, int number,
                     const std::vector<RankRecord>& placement) override;
  Result<std::vector<int>> InterruptUnfinished(int64_t study_id, double now,
                                               const std::string& reason) override;
  Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) override;
  Result<std::vector<TrialRecord>> ListTrialsIn(int64_t study_id,
                                                std::span<const TrialState> states) override;
  Result<std::vector<TrialRecord>> BestTrials(int64_t study_id, Direction direction,
                                              std::optional<double> bound, int limit) override;
  Result<TrialTally> TallyTrials(int64_t study_id) override;
  // BEGIN IMMEDIATE makes every writing transaction exclusive: nothing more to hold.
  Status LockStudy(int64_t /*study_id*/) override { return Status::Ok(); }
  Result<int> NextTrialNumber(int64_t study_id) override;
  Result<std::string> TunerState(int64_t study_id) override;
  Status SetTunerState(int64_t study_id, const std::string& state) override;

  Status AddMetrics(int64_t study_id, int trial_number,
                    std::span<const MetricPoint> points) override;
  Result<std::vector<MetricPoint>> TrialMetrics(int64_t study_id, int trial_number) override;
  Result<std::optional<MetricPoint>> LatestMetric(int64_t study_id, int trial_number,
                                                  const std::string& name) override;
  Status AddEvent(int64_t study_id, const EventRecord& event) override;
  Result<std::vector<EventRecord>> ListEvents(int64_t study_id, int limit) override;
  Result<std::vector<EventRecord>> ListEventsOfKinds(int64_t study_id,
                                                     std::span<const EventKind> kinds) override;

  Status AddJournal(int64_t study_id, std::span<const JournalEntry> entries) override;
  Result<std::vector<JournalEntry>> ListJournal(int64_t study_id) override;

  Result<int64_t> AddSubmission(const SubmissionRecord& submission) override;
  Status SetSubmissionState(int64_t id, SubmissionState state, int exit_code,
                            const std::string& message) override;
  Result<std::vector<SubmissionRecord>> ListSubmissions(
      std::vector<SubmissionState> states) override;
  Result<int64_t> AddControl(int64_t study_id, const ControlRecord& control) override;
  Result<std::vector<ControlRecord>> ListControls(int64_t study_id, bool pending_only) override;
  Status FinishControl(int64_t id, double applied, bool refused,
                       const std::string& outcome) override;
  Status DeleteStudy(int64_t study_id) override;

 private:
  // The connection is defined in sqlite_storage.cc, so that this header sees nothing of SQLite.
  class Connection;
  friend Result<std::unique_ptr<Storage>> OpenSqlite(const std::string& path,
                                                     const Storage::Options& options);
  explicit SqliteStorage(std::unique_ptr<Connection> db);

  std::unique_ptr<Connection> db_;
  int lead_fd_ = -1;  // PATH-leader, locked while this handle leads
};

}  // namespace hyperpack::storage
