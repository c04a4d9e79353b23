// The Executor that runs each trial as one Slurm job (slurm.h says what a user sees).
//
// StartGang writes the job's script into the trial's folder and hands sbatch to the executor's
// command thread; every rank counts as started at once (queued). From then on, one squeue call
// per poll interval answers for all of the study's jobs, the jobs' output files are read as they
// grow (each line to on_line, as a local rank's pipe would give it), and a job's final state
// becomes every rank's on_exit. Signal is scancel. Jobs found before the run (a restarted
// `hyperpack run`) are re-attached when the controller launches their trial again, instead of
// being submitted twice; those it never launches again are cancelled at Shutdown.
//
// Thread-safety: every method and callback on the io_context's thread; Slurm's commands run on the
// executor's own thread and post their results back.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "hyperpack/scheduler/executor.h"
#include "hyperpack/study/spec.h"
#include "slurm_policy.h"

namespace hyperpack::scheduler::slurm {

struct ExecutorOptions {
  study::SlurmSpec spec;
  std::string study;     // the study's name, in job names and comments
  std::string self_exe;  // this hyperpack, which every task runs as `hyperpack slurm-task`
  // The study's jobs that squeue showed before the run began, to re-attach.
  std::vector<SqueueRow> existing;
};

std::unique_ptr<Executor> MakeSlurmExecutor(boost::asio::io_context& io, ExecutorOptions options);

// One squeue call for this user's jobs, keeping the study's (blocking; for before the run).
Result<std::vector<SqueueRow>> ListStudyJobs(const std::string& study);

// The job's script: the trial's environment (exported where it differs from this process's, unset
// where the trial must not inherit it), then one srun of `hyperpack slurm-task COMMAND` whose
// tasks write DIR/task-<rank>.out and .err, then its exit code into DIR/slurm-exit-<job id>.
std::string JobScript(const GangRequest& gang, const std::string& self_exe,
                      const std::vector<std::string>& inherited_env);

}  // namespace hyperpack::scheduler::slurm
