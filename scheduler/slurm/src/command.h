// Running one of Slurm's client commands (sbatch, squeue, sacct, scancel, scontrol) and keeping
// what it printed. Blocking: the executor calls it on its own thread, never on the io thread.
// Thread-safety: safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::scheduler::slurm {

struct CommandOutput {
  int exit_code = 0;  // 128 + N when killed by signal N
  std::string out;    // standard output, at most kMaxCommandOutput bytes
  std::string err;    // standard error, likewise
  bool truncated = false;
};
inline constexpr size_t kMaxCommandOutput = 64 << 20;

// Runs argv[0] (found on PATH) with this process's environment. A command still running after
// `timeout_s` is killed, and it and one that cannot be started are Unavailable
// (e.g. "sbatch: not found: is slurm-client installed?").
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, double timeout_s);

}  // namespace hyperpack::scheduler::slurm
