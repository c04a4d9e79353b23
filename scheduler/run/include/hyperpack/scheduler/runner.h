// The runner: runs a study's trials as child processes on this machine and records everything.
//
// RunStudy creates the study in storage (or resumes it: finished trials stay, trials that were
// running when an earlier runner died are marked interrupted and run again), then keeps up to
// `max_parallel` trials running until the budget is spent, the time limit passes, too many trials
// fail, or it is interrupted (SIGINT/SIGTERM: running trials are stopped and marked interrupted,
// and the study can be resumed later).
//
// Trials are placed by the scheduler (placement.h) on this machine: `resources.gpus: G` makes a
// gang of G ranks with one GPU each, started together with torchrun's variables (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and their own
// CUDA_VISIBLE_DEVICES; `resources.cpus: C` one process holding C CPU slots. If one rank fails
// the gang is stopped. Each rank runs `/bin/sh -c COMMAND` in its own process group, with its
// parameters in the command ({name}), the environment (HYPERPACK_TRIAL_ID, HYPERPACK_PARAMS,
// HP_<NAME>) and a JSON file (HYPERPACK_PARAMS_FILE). Its stdout is read for metric lines (see
// metrics.h); everything it prints goes to a per-trial log. Exit 0 with the objective reported:
// completed; exit 3: infeasible; another exit: failed (the tail of stderr kept); past
// trial.timeout: killed, timeout.
//
// Early stopping (`pruner:`, tuner/pruner.h): every report of the objective goes to the pruner at
// its resource (the line's epoch or step). A trial it stops is signalled at once and ends pruned,
// the reason in its error and the event log. In ASHA's promote mode a trial trains to its rung
// (HYPERPACK_STOP_AT, read by hyperpack-trainer) and is stopped there; if its checkpoint directory
// holds anything it ends paused, frees its slots, and is resumed under the same number
// (HYPERPACK_RESUME=1) when the pruner promotes it; otherwise it runs on, judged as in stop mode.
// Promotions go before new trials. Paused trials count against max_trials; those never promoted
// are pruned when the budget is spent. The tuner learns every rung's value at its fidelity.
//
// Every decision is the StudyController's (study_controller.h); this is its live driver on this
// machine (run/src/local_driver.cc). RunSummary is declared there.
//
// Threads: RunStudy blocks the calling thread, which runs the io_context that owns all runner
// state; the tuner runs on a pool in order, SQLite writes go to one writer thread, in order,
// batched into transactions.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "hyperpack/scheduler/local_node.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::scheduler {

struct RunOptions {
  std::string storage_path = "hyperpack.db";
  // Trial logs and parameter files go to LOG_DIR/STUDY/trial-NNNN/. Default: a directory
  // hyperpack_logs next to the database.
  std::string log_dir;
  std::optional<int> max_trials;    // overrides budget.max_trials
  std::optional<int> max_parallel;  // overrides budget.max_parallel
  // kLine redraws one progress line (for a terminal); kLog prints a line per event; kQuiet
  // prints only the final summary.
  enum class Progress { kLine, kLog, kQuiet };
  Progress progress = Progress::kLog;
  std::ostream* out = nullptr;  // progress and summary; default std::cout
  double kill_grace_s = 5.0;    // SIGTERM, then SIGKILL this much later
  double preempt_after_s = 0;   // on a shared server: ControllerOptions::preempt_after_s
  bool handle_signals = true;   // install SIGINT/SIGTERM handlers
  // The machine trials are placed on (resources.gpus / cpus); detected when absent.
  std::optional<LocalNode> node;
  // When set, progress lines go here instead of `out` (hyperpack serve sends them to its client).
  std::function<void(const std::string&)> on_progress;
  // Called on the run's io thread with how long each of the tuner's proposals took (seconds,
  // wall clock, on the pool) and how many configurations it asked for.
  std::function<void(double seconds, int n)> on_proposed;
};


// Runs (or resumes) the study. Errors: the study exists with a different search space or
// objective, another live process is running it, or storage fails.
Result<RunSummary> RunStudy(const study::StudySpec& spec, const RunOptions& options);

}  // namespace hyperpack::scheduler
