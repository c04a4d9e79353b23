// Trials as Slurm jobs: `cluster: {slurm: {...}}` in the study file, or `hyperpack run --slurm`.
//
// hyperpack still decides what runs and in which order (the tuner, max_parallel, the pruner,
// requeues); Slurm decides where. Each trial becomes one batch job whose request follows from the
// trial's demand (a gang of G GPUs: G tasks with one GPU each, over ceil(G / gpus_per_node) nodes;
// a CPU trial: one task with its CPUs), named "hp:<study>:<trial>" and commented with the study,
// the trial, its first attempt and the attempt. The job's script runs every task through
// `hyperpack slurm-task`, which sets torchrun's variables from Slurm's and runs the trial's
// command. Its output files are followed as they grow, so metrics reach the study while the job
// runs; the jobs are followed with one squeue call per poll interval for the whole study, and sacct
// only where accounting works (the script also leaves its exit code in the trial's folder).
// Pruning, timeouts and Ctrl-C become scancel. A preempted job runs again from its checkpoint
// (as a new attempt, or as the same job when the cluster requeues it); a TIMEOUT is a timeout.
// A restarted `hyperpack run` re-attaches to the study's jobs still queued or running instead of
// submitting them again.
//
// Thread-safety: RunSlurmStudy blocks its caller, as RunStudy does; RunSlurmTask replaces the
// process.
#pragma once

#include <string>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::scheduler {

// Runs (or resumes) a study whose spec.cluster.slurm is set. Before anything is stored, the
// request is tried with `sbatch --test-only`: a refusal is an Invalid status naming the study
// file's line and key (e.g. cluster.slurm.partition) with Slurm's own words.
Result<RunSummary> RunSlurmStudy(const study::StudySpec& spec, const RunOptions& options);

// `hyperpack slurm-task COMMAND`: what each task of a trial's job step runs. Sets RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and HYPERPACK_RESUME after a
// requeue) from Slurm's variables, leaves the warning signal (SIGUSR1) ignored for the shell (a
// command that installs a handler gets it), and execs /bin/sh -c COMMAND. Returns only when it
// could not: the message, for an exit code of 127.
Status RunSlurmTask(const std::string& command);

}  // namespace hyperpack::scheduler
