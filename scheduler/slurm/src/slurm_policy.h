// What hyperpack decides about Slurm jobs, as pure functions over text and values: the request a
// trial's demand becomes, the names that find a study's jobs again, what squeue and sacct print,
// what a job's state means for the trial, and which pending reasons never clear. No processes, no
// clock: slurm_executor.cc runs the commands and feeds their output through these.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::scheduler::slurm {

// "node[01-03,7],gpu-a1" -> node01 node02 node03 node7 gpu-a1, as `scontrol show hostnames`
// does (leading zeros kept to the width written; several bracket groups in one name expand as a
// product). Malformed lists (unbalanced brackets, a range whose end is below its start, a range
// of more than 1e6 hosts) are an error.
Result<std::vector<std::string>> ExpandHostList(std::string_view list);

// A trial's demand, as the study's `resources` gave it.
struct Demand {
  int gpus = 0;         // > 0: a gang of this many ranks, one GPU each
  int cpus = 0;         // a CPU trial's slots (one rank)
  GpuShare share = {};  // any(): one rank with this part of one GPU (gpus is then 0)
};

// The shards of one GPU (Slurm's shard gres, cluster.slurm.gpu_shards of them per GPU) that hold
// `share`: its fraction of the shards and its memory's (over cluster.slurm.gpu_memory), rounded
// up, at least 1. An error names the key that is missing (no gpu_shards; a memory share and no
// gpu_memory) or says the share is larger than one GPU.
Result<int> ShardsFor(const study::SlurmSpec& spec, const GpuShare& share);

// The shape of one job. A gang of G GPUs asks for nodes = ceil(G / gpus_per_node) (one node when
// gpus_per_node is 0 or >= G) with G / nodes tasks and GPUs on each; a gang spanning nodes must be
// a multiple of gpus_per_node (no node left with idle GPUs), else an error naming gpus_per_node. A
// CPU trial: one node, one task, cpus_per_task = its slots (at least 1).
struct JobShape {
  int nodes = 1;
  int tasks_per_node = 1;
  int gpus_per_node = 0;
  int cpus_per_task = 0;  // 0: not asked
  int shards = 0;         // > 0: one task on this many shards of one GPU (--gres=shard:N)
};
Result<JobShape> ShapeFor(const study::SlurmSpec& spec, const Demand& demand);

// What a job carries so that a restarted `hyperpack run` finds it again.
struct JobTag {
  std::string study;
  int trial = 0;  // the attempt's trial number
  int root = 0;   // the first attempt's number (the checkpoint folder's)
  int attempt = 1;
};
// "hp:<study>:<trial>": --job-name (squeue shows it; <study> as written, ':' and spaces become
// '_').
std::string JobName(const JobTag& tag);
// The study's part of every job name: "hp:<study>:", to match squeue's names against.
std::string JobNamePrefix(const std::string& study);
// "hyperpack study=<study> trial=<n> root=<n> attempt=<n>": --comment. The study name is
// percent-encoded where it holds spaces, '=' or '%'.
std::string JobComment(const JobTag& tag);
std::optional<JobTag> ParseJobComment(std::string_view comment);

// Everything sbatch is told, except the script's path (the last argument, added by the caller):
// --parsable, --job-name, --comment, --nodes, --ntasks-per-node, --gpus-per-node (or
// --gres=gpu:N), --cpus-per-task, --mem, --partition, --account, --qos, --constraint, --time
// (minutes, rounded up), --signal, --output/--error (`log_dir`/slurm-%j.out), --open-mode=append
// (a requeued job appends), --requeue, then extra_args as written.
std::vector<std::string> SbatchArgs(const study::SlurmSpec& spec, const JobShape& shape,
                                    const JobTag& tag, const std::string& log_dir);

enum class JobState {
  kPending,
  kConfiguring,
  kRunning,
  kCompleting,
  kSuspended,
  kRequeued,  // REQUEUED, REQUEUE_HOLD, REQUEUE_FED: on its way back to pending
  kCompleted,
  kFailed,
  kCancelled,
  kTimeout,
  kNodeFail,
  kPreempted,
  kOutOfMemory,
  kBootFail,
  kDeadline,
  kUnknown,  // a state this version does not know
};
// "RUNNING", "CANCELLED by 1000", "CANCELLED+", "OUT_OF_MEMORY", abbreviations ("PD", "R", "CA",
// "TO", "NF", "PR", "OOM", "BF", "DL", "CG", "CF", "S", "RQ", "CD", "F") -> the state.
JobState ParseJobState(std::string_view text);
const char* JobStateName(JobState s);
bool IsFinal(JobState s);  // the job will not run again

// The format squeue is asked for, and its rows: squeue --noheader --states=all --user=<me>
// --format=<kSqueueFormat>. Fields are separated by '|'; the comment is last and may hold any.
inline constexpr char kSqueueFormat[] = "%i|%j|%T|%r|%N|%k";
struct SqueueRow {
  std::string job_id;
  std::string name;
  JobState state = JobState::kUnknown;
  std::string reason;    // "None", "Priority", "PartitionConfig", "ReqNodeNotAvail, Unavail..."
  std::string nodelist;  // as Slurm writes it; empty or "(null)" while pending
  std::string comment;
};
// Lines that do not have six fields are skipped (a job name may not hold '|': squeue shows other
// users' tools' jobs too).
std::vector<SqueueRow> ParseSqueue(std::string_view text);

// sacct --noheader --parsable2 --allocations --jobs=<ids> --format=JobID,State,ExitCode
inline constexpr char kSacctFormat[] = "JobID,State,ExitCode";
struct SacctRow {
  std::string job_id;
  JobState state = JobState::kUnknown;
  std::string exit_code;  // "exit:signal", e.g. "0:0", "2:0", "0:9"
};
std::vector<SacctRow> ParseSacct(std::string_view text);
// True when sacct's output (stdout and stderr together) says accounting is off, e.g. "Slurm
// accounting storage is disabled": then sacct is not asked again.
bool SacctSaysDisabled(std::string_view output);

// Slurm's ExitCode "exit:signal" -> RankExit: "0:0" exited 0, "2:0" exited 2, "0:9" signaled 9.
// Malformed: nullopt.
std::optional<RankExit> DecodeExitCode(std::string_view exit_code);

// What a job's final state means for the trial's ranks. `exit_code` (from sacct, or from the
// file the job's script writes) decides COMPLETED and FAILED; without it FAILED is exit 1.
// TIMEOUT -> kTimedOut; PREEMPTED -> kPreempted; NODE_FAIL, BOOT_FAIL -> kLost; OUT_OF_MEMORY ->
// signaled 9 (the kernel's OOM kill); CANCELLED -> signaled 15 (ours, or someone's scancel);
// DEADLINE -> kTimedOut.
//
// `notice` is what slurmstepd wrote into the job's output when Slurm ended it (see
// ParseStepNotice). A job whose script exits on its own before slurmctld records the preemption
// (or the time limit) ends FAILED or CANCELLED; the notice then says what happened, and it wins
// over a non-zero exit of COMPLETED, FAILED and CANCELLED: preemption -> kPreempted, time limit
// -> kTimedOut, node failure and requeue -> kLost.
enum class StepNotice { kNone, kTimeLimit, kPreemption, kNodeFailure, kRequeue };
RankExit ExitFor(JobState final_state, const std::optional<RankExit>& exit_code,
                 StepNotice notice = StepNotice::kNone);

// slurmstepd's line when Slurm cancels a job or a step: "slurmstepd: error: *** STEP 12.0 ON
// node CANCELLED AT 2026-01-01T00:00:00 DUE TO PREEMPTION ***" (older releases: "*** JOB 12
// CANCELLED AT ... DUE TO TIME LIMIT on node ***"). Any other line: kNone.
StepNotice ParseStepNotice(std::string_view line);

// A pending reason that cannot clear by waiting (the job asks for what the partition never
// gives): PartitionConfig, PartitionNodeLimit, PartitionTimeLimit, BadConstraints, InvalidAccount,
// InvalidQOS, AccountNotAllowed, QOSNotAllowed, ReqNodeNotAvail (this one only when every node
// is unavailable, which the caller judges by how long it has lasted), JobHeldAdmin is not one.
enum class PendingKind { kWaits, kNeverClears, kMayNotClear };
PendingKind ClassifyPending(std::string_view reason);

// Which key of `cluster.slurm` (or "resources") sbatch's refusal is about, from its message:
// "invalid partition specified" -> "partition", "Invalid account" -> "account", "Invalid qos" ->
// "qos", "Requested node configuration is not available" -> "resources", "Invalid feature
// specification" -> "constraint", "Requested time limit is invalid" -> "time_limit"; otherwise "".
std::string RefusalKey(std::string_view sbatch_error);

// The torchrun contract from Slurm's variables, for one task of a job step: RANK (SLURM_PROCID),
// WORLD_SIZE (SLURM_NTASKS), LOCAL_RANK (SLURM_LOCALID), LOCAL_WORLD_SIZE (SLURM_NTASKS_PER_NODE,
// or the tasks on this node from SLURM_TASKS_PER_NODE), MASTER_ADDR (the first host of the
// expanded SLURM_JOB_NODELIST), MASTER_PORT (10000 + SLURM_JOB_ID % 50000, unless MASTER_PORT is
// set already), HYPERPACK_RESUME=1 when SLURM_RESTART_COUNT > 0, and CUDA_VISIBLE_DEVICES narrowed
// to this task's device (the LOCAL_RANK-th of the node's, when the node's list is longer than one
// per task). `env` is the task's environment; the result is what to set. Missing or malformed
// variables are an error naming them.
Result<std::map<std::string, std::string>> TorchrunFromSlurm(
    const std::map<std::string, std::string>& env);

// A value for a POSIX shell, single-quoted ('it'\''s').
std::string ShellQuote(std::string_view value);

}  // namespace hyperpack::scheduler::slurm
