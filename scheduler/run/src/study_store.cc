#include "study_store.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include "hyperpack/host.h"

namespace hyperpack::scheduler {
namespace {

namespace fs = std::filesystem;
using storage::EventKind;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using study::StudySpec;

// Completed trials of another study that fit this space (tuner.warm_start), read before anything
// is written so that a bad name changes nothing.
Status LoadWarmStart(Storage& db, const StudySpec& spec, const std::string& storage_path,
                     PreparedStudy* out) {
  const std::string& other = spec.tuner.warm_start;
  if (other.empty()) return Status::Ok();
  if (other == spec.name) return Status::Invalid("tuner.warm_start names this study itself");
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(other));
  if (!found)
    return Status::NotFound("tuner.warm_start: no study named '", other, "' in ", storage_path);
  if (found->metric != spec.objective.metric || found->direction != spec.objective.direction)
    return Status::Invalid("tuner.warm_start: study '", other, "' optimises ",
                           DirectionName(found->direction), " ", found->metric, ", this one ",
                           DirectionName(spec.objective.direction), " ", spec.objective.metric);
  HP_ASSIGN_OR_RETURN(auto trials, db.ListTrials(found->id));
  int used = 0, skipped = 0;
  for (const TrialRecord& t : trials) {
    if (t.state != TrialState::kCompleted || !t.value) continue;
    if (!spec.space.Validate(t.params).ok()) {
      ++skipped;
      continue;
    }
    tuner::TrialOutcome o;
    o.config = t.params;
    o.value = t.value;
    out->warm.push_back(std::move(o));
    ++used;
  }
  out->warm_note = StrCat("; warm start from ", used, " trials of '", other, "'",
                          skipped ? StrCat(" (", skipped, " outside this space skipped)") : "");
  return Status::Ok();
}

}  // namespace

storage::StudyRecord NewStudyRecord(const StudySpec& spec) {
  storage::StudyRecord study;
  study.name = spec.name;
  study.spec_text = spec.source_text;
  study.spec_path = spec.source_path;
  study.direction = spec.objective.direction;
  study.metric = spec.objective.metric;
  study.seed = spec.tuner.seed ? *spec.tuner.seed : std::random_device{}() & 0x7fffffff;
  study.created = WallNow();
  return study;
}

Status CheckCompatible(const storage::StudyRecord& study, const StudySpec& spec,
                       const std::string& storage_path) {
  study::ParseOutcome stored = study::ParseStudy(study.spec_text, study.spec_path);
  if (!stored.spec) return Status::Ok();  // written by another version; trust the new file
  const StudySpec& old = *stored.spec;
  std::string hint = " than the stored study; give the study a new name to start afresh";
  if (old.space.Describe() != spec.space.Describe())
    return Status::FailedPrecondition("study '", spec.name, "' exists in ", storage_path,
                                      " with a different search space", hint);
  if (old.objective.metric != spec.objective.metric ||
      old.objective.direction != spec.objective.direction)
    return Status::FailedPrecondition("study '", spec.name, "' exists in ", storage_path,
                                      " with a different objective", hint);
  return Status::Ok();
}

// Another live process on this host, or any process on another host, holds the study.
Status CheckNotHeld(const storage::StudyRecord& study, const StudySpec& spec) {
  if (!storage::RunnerAlive(study) || *study.runner_pid == getpid()) return Status::Ok();
  if (study.runner_host != HostName())
    return Status::FailedPrecondition("study '", spec.name, "' is being run by pid ",
                                      *study.runner_pid, " on ", study.runner_host,
                                      "; stop that runner first");
  return Status::FailedPrecondition("study '", spec.name, "' is already running (pid ",
                                    *study.runner_pid, "); follow it with: hyperpack status ",
                                    spec.name);
}

namespace {

// In one transaction: the study created or checked, claimed, its unfinished trials interrupted,
// and what the controller replays read.
Status Claim(Storage& db, const StudySpec& spec, const std::string& storage_path,
             PreparedStudy* out) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(spec.name));
  storage::StudyRecord study;
  if (!found) {
    HP_ASSIGN_OR_RETURN(study, db.CreateStudy(NewStudyRecord(spec)));
  } else {
    study = *found;
    HP_RETURN_IF_ERROR(CheckCompatible(study, spec, storage_path));
    HP_RETURN_IF_ERROR(CheckNotHeld(study, spec));
  }
  out->stored.resumed = found.has_value();
  out->study_id = study.id;
  out->seed = study.seed;
  HP_RETURN_IF_ERROR(db.SetRunner(study.id, getpid(), HostName()));
  HP_RETURN_IF_ERROR(
      db.InterruptUnfinished(study.id, WallNow(), "the runner stopped before the trial ended")
          .status());
  HP_ASSIGN_OR_RETURN(out->stored.trials, db.ListTrials(study.id));
  HP_ASSIGN_OR_RETURN(out->stored.journal, db.ListJournal(study.id));
  HP_ASSIGN_OR_RETURN(out->stored.next_number, db.NextTrialNumber(study.id));
  HP_ASSIGN_OR_RETURN(out->stored.controls, db.ListControls(study.id, /*pending_only=*/true));
  EventKind kind = out->stored.resumed ? EventKind::kRunResumed : EventKind::kRunStarted;
  return db.AddEvent(study.id, {WallNow(), std::nullopt, storage::EventKindName(kind),
                                StrCat("pid ", getpid(), " on ", HostName())});
}

}  // namespace

bool FolderHoldsSomething(const std::string& path) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    (void)entry;
    return true;
  }
  return false;
}

Result<PreparedStudy> PrepareStudy(const StudySpec& spec, const std::string& storage_path,
                                   const std::string& log_dir) {
  PreparedStudy out;
  // A database file's folder is made for it; logs go next to it, or, for a server's database or
  // a memory store, in the current folder.
  const std::optional<std::string> file = storage::StorageFile(storage_path);
  const fs::path db_path(file.value_or("hyperpack.db"));
  if (file && db_path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(db_path.parent_path(), ec);
  }
  HP_ASSIGN_OR_RETURN(out.db, Storage::Open(storage_path));
  fs::path root = log_dir.empty() ? fs::absolute(db_path).parent_path() / "hyperpack_logs"
                                  : fs::absolute(log_dir);
  out.log_root = (root / spec.name).string();
  HP_RETURN_IF_ERROR(LoadWarmStart(*out.db, spec, storage_path, &out));
  HP_RETURN_IF_ERROR(out.db->Transaction([&] { return Claim(*out.db, spec, storage_path, &out); }));
  for (const TrialRecord& t : out.stored.trials)
    if (FolderHoldsSomething(out.log_root + "/" + TrialFolderName(t.number) + "/checkpoint"))
      out.stored.checkpoints.insert(t.number);
  return out;
}

Result<std::pair<storage::StudyRecord, StudySpec>> LoadStoredStudy(Storage& db,
                                                                   const std::string& name) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found)
    return Status::NotFound("no study named '", name, "' in ", db.path(),
                            "; make one with: hyperpack create STUDY.yaml (or hyperpack run)");
  study::ParseOutcome parsed = study::ParseStudy(found->spec_text, found->spec_path);
  if (!parsed.spec)
    return Status::FailedPrecondition(
        "study '", name,
        "': its stored file does not parse with this hyperpack: ", parsed.ErrorText());
  return std::make_pair(*found, *parsed.spec);
}

namespace {
struct RowWriter {
  Storage& db;
  int64_t study_id;
  Status operator()(const InsertTrialRow& r) { return db.InsertTrial(r.trial); }
  Status operator()(const FinishTrialRow& r) { return db.FinishTrial(r.trial); }
  Status operator()(const ResumeTrialRow& r) {
    return db.ResumeTrial(study_id, r.trial, r.placement);
  }
  Status operator()(const MetricsRow& r) { return db.AddMetrics(study_id, r.trial, r.points); }
  Status operator()(const EventRow& r) { return db.AddEvent(study_id, r.event); }
  Status operator()(const JournalRow& r) {
    return db.AddJournal(study_id, std::span<const storage::JournalEntry>(&r.entry, 1));
  }
  Status operator()(const ReleaseStudyRow&) { return db.SetRunner(study_id, std::nullopt, ""); }
  Status operator()(const ControlDoneRow& r) {
    Status s = db.FinishControl(r.id, r.applied, r.refused, r.outcome);
    // Taken by someone else meanwhile (an ask): theirs stands.
    return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
  }
};
}  // namespace

Status ApplyRows(Storage& db, int64_t study_id, const std::vector<Row>& rows) {
  RowWriter writer{db, study_id};
  for (const Row& row : rows) HP_RETURN_IF_ERROR(std::visit(writer, row));
  return Status::Ok();
}

}  // namespace hyperpack::scheduler
