// Every environment variable that passes between hyperpack and a trial's processes, by name.
//
// The runner sets them (scheduler/), hyperpack-trainer and user scripts read them (trainer/). One
// list, so that a writer and a reader can never spell a name two ways.
// Thread-safety: constants only.
#pragma once

namespace hyperpack::env {

// ---- What hyperpack tells a trial ----
inline constexpr char kStudy[] = "HYPERPACK_STUDY";             // the study's name
inline constexpr char kTrialId[] = "HYPERPACK_TRIAL_ID";        // the trial's number
inline constexpr char kAttempt[] = "HYPERPACK_TRIAL_ATTEMPT";   // 1, 2, ... (re-runs)
inline constexpr char kTrialDir[] = "HYPERPACK_TRIAL_DIR";      // its log and params folder
inline constexpr char kParams[] = "HYPERPACK_PARAMS";           // its parameters as JSON
inline constexpr char kParamsFile[] = "HYPERPACK_PARAMS_FILE";  // the same, as a file
// Shared by every attempt of a trial; a re-run or a promotion resumes from it.
inline constexpr char kCheckpointDir[] = "HYPERPACK_CHECKPOINT_DIR";
inline constexpr char kResume[] = "HYPERPACK_RESUME";  // "1": continue from the checkpoint
// Early stopping in promote mode: train to this many epochs, checkpoint, and exit.
inline constexpr char kStopAt[] = "HYPERPACK_STOP_AT";
// With kStopAt, where the runner can: a file descriptor (kControlFdNumber) from which a trial that
// has reached its stop epoch, checkpointed and printed its line may read, on rank 0, one line:
// "continue N" (promoted: train on to N epochs in the same process) or end of file. Reading it is
// optional: a trial that exits at kStopAt is paused and, if promoted, restarted from its
// checkpoint.
inline constexpr char kControlFd[] = "HYPERPACK_CONTROL_FD";
inline constexpr int kControlFdNumber = 3;
inline constexpr char kCpus[] = "HYPERPACK_CPUS";    // CPU slots this rank holds
inline constexpr char kAgent[] = "HYPERPACK_AGENT";  // the agent's node, when an agent runs it
// Each parameter also comes as HP_<NAME> (study::ParamEnvName).
inline constexpr char kParamPrefix[] = "HP_";

// ---- torchrun's contract, for a gang of ranks ----
inline constexpr char kRank[] = "RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";

// ---- A metric hyperpack reads by name from a trial's lines ----
// hyperpack-trainer's peak GPU memory so far (MiB); the packer of GPU shares learns from it.
inline constexpr char kPeakGpuMetric[] = "peak_gpu_mb";
// The epoch a trial's line gave, stored beside its metrics for charts (the study page reads it).
inline constexpr char kEpochMetric[] = "epoch";

// ---- What hyperpack's own commands read ----
inline constexpr char kStorage[] = "HYPERPACK_STORAGE";  // the default --storage

// Python holds back a pipe's output until exit unless this is set.
inline constexpr char kPythonUnbuffered[] = "PYTHONUNBUFFERED";

}  // namespace hyperpack::env
