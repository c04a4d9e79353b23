// Ask and tell: a study whose trials a program outside hyperpack evaluates. `hyperpack create`
// stores the study (its file needs no trial.command), `hyperpack ask` reserves a trial and hands
// out its parameters, `hyperpack tell` records how it ended. The proposals come from the study's
// own tuner (tuner: in its file, its stored seed), which observes every ended trial and counts the
// trials asked and not yet told as pending, so that programs asking in parallel get different
// configurations. A study with `ask_timeout:` expects each asked trial's tell, or a heartbeat,
// within it; a trial that goes quiet is failed and its configuration asked again. Thread-safety:
// each call uses the Storage it is given on the calling thread; calls from several processes on one
// store are safe (Ask reserves its number in a transaction, and retries on a number another process
// took).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/optuna.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::scheduler {

// Stores the study of `spec`. When one of that name exists, its search space and objective must
// be the same (kFailedPrecondition otherwise); *created says which happened.
Result<storage::StudyRecord> CreateStudy(storage::Storage& db, const study::StudySpec& spec,
                                         bool* created);

struct AskedTrial {
  int number = 0;
  Config params;
};

// Reserves study `name`'s next trial: one configuration proposed by its tuner, recorded as running
// on `host`. First, where the study has an ask_timeout, each asked trial with no tell or heartbeat
// within it is failed, and its configuration is the one this ask hands out (while it has
// attempts left: budget.max_attempts). Errors: kNotFound (no such study), kFailedPrecondition (a
// runner holds the study; its budget.max_trials are all asked; its space has no configuration
// left), kIo.
Result<AskedTrial> Ask(storage::Storage& db, const std::string& name, const std::string& host,
                       double now);

// How an asked trial ended.
struct Tell {
  storage::TrialState state = storage::TrialState::kCompleted;  // completed, pruned, failed or
                                                                // infeasible
  std::optional<double> value;  // completed and pruned: the objective; recorded as a metric too
  std::optional<int64_t> step;  // the step the value was measured at (a pruned trial's)
  // A study with several objectives or constraints: each one's value by metric, instead of
  // `value` (a completed trial needs every objective's; a pruned one the first's).
  std::map<std::string, double> values;
};

// Records trial `number` of study `name` as `tell` says. Errors: kNotFound (no such study or
// trial), kFailedPrecondition (the trial is not running: told already, or run by a runner),
// kInvalidArgument (a completed or pruned trial without a finite value, a value for a failed one,
// a state tell does not take; with several objectives or constraints, `value` instead of
// `values`, a value of a metric the study does not keep, or an objective missing), kIo.
Status TellTrial(storage::Storage& db, const std::string& name, int number, const Tell& tell,
                 double now);

// Tells the study that asked trial `number` is still being evaluated: its heartbeat is now, and
// its ask_timeout counts from here. Errors: kNotFound (no such study or trial),
// kFailedPrecondition (the trial is not running: told already, or failed for want of a heartbeat,
// the message says which), kIo.
Status HeartbeatTrial(storage::Storage& db, const std::string& name, int number, double now);

// A study brought over with its history (`hyperpack import` of an Optuna storage), stored in one
// transaction: the study of `spec`, `trials` as its first trials (numbered 0, 1, ... in their
// order; their reports as the first objective's metric), and `waiting` queued to run first (as
// `hyperpack enqueue` queues). Every configuration is conformed to the space first; one that does
// not fit is an error naming its Optuna trial, and nothing is written. Errors: kAlreadyExists (a
// study of that name is stored already), kInvalidArgument, kIo.
struct StoredImport {
  storage::StudyRecord study;
  std::map<storage::TrialState, int> counts;  // the stored trials by state
  int queued = 0;
};
Result<StoredImport> StoreImportedStudy(storage::Storage& db, const study::StudySpec& spec,
                                        const std::vector<study::ImportedTrial>& trials,
                                        const std::vector<Config>& waiting);

}  // namespace hyperpack::scheduler
