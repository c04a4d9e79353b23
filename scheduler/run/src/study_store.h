// A run's study in storage: claimed and read when the run begins (PrepareStudy), written as the
// controller says (ApplyRows), released when the run ends.
// Thread-safety: PrepareStudy opens its own connection and may run on any thread; ApplyRows uses
// the connection it is given, on that connection's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::scheduler {

struct PreparedStudy {
  std::unique_ptr<storage::Storage> db;
  StoredStudy stored;
  int64_t study_id = 0;
  uint64_t seed = 0;
  std::vector<tuner::TrialOutcome> warm;  // tuner.warm_start: another study's completed trials
  std::string warm_note;
  std::string log_root;  // LOG_DIR/STUDY
};

// Creates the study (or resumes it: trials that were running when an earlier runner died are
// marked interrupted), claims it for this process, and reads what the controller replays.
// Errors: the study exists with a different search space or objective, another live process runs
// it, the warm-start study is missing or different, or storage fails. On error nothing was changed.
Result<PreparedStudy> PrepareStudy(const study::StudySpec& spec, const std::string& storage_path,
                                   const std::string& log_dir);

// The record of a study not stored yet: its file, objective, seed (the file's, else a random one)
// and the time now.
storage::StudyRecord NewStudyRecord(const study::StudySpec& spec);
// OK when the stored `study` has `spec`'s search space and objective (or a file this version
// cannot read); kFailedPrecondition saying which differs otherwise.
Status CheckCompatible(const storage::StudyRecord& study, const study::StudySpec& spec,
                       const std::string& storage_path);
// OK unless another live process (on this host, or any on another host) runs the study.
Status CheckNotHeld(const storage::StudyRecord& study, const study::StudySpec& spec);

// The stored study `name` and its parsed file. kNotFound when there is none (the message says how
// to make one); kFailedPrecondition when its file does not parse with this hyperpack.
Result<std::pair<storage::StudyRecord, study::StudySpec>> LoadStoredStudy(storage::Storage& db,
                                                                          const std::string& name);

// Writes the controller's rows, in order.
Status ApplyRows(storage::Storage& db, int64_t study_id, const std::vector<Row>& rows);

// True when the folder exists and holds something (a trial's checkpoint).
bool FolderHoldsSomething(const std::string& path);

}  // namespace hyperpack::scheduler
