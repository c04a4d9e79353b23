// A fence around a runner's process groups: a small process of its own (the keeper) that kills
// them when its owner can no longer see to it. PR_SET_PDEATHSIG reaches only the process a runner
// forked, not what that process started (a shell's children, a launcher's ranks); the keeper
// kills every group it was told of, with SIGKILL, when its owner dies however it died (its end
// of the keeper's socket closes), and, once a lease is armed, when the owner stops renewing it.
// The local executor tells a fence of every group it starts and reaps (its own, or the agent's).
// The agent's fence also has a lease, renewed each time the agent hears from its server: once
// the server has not been heard from for the lease, the server may be about to run those trials
// elsewhere, so these attempts must be gone, even when the agent itself cannot act (stopped with
// SIGSTOP, hung), which a timer inside the agent could not see to.
//
// The keeper runs only async-signal-safe code (poll, recv, kill, clock_gettime, close_range,
// _exit), so it may be forked from a process with threads. It keeps no descriptor of its owner's
// but its socket: it holds no pipe, connection or database of its owner's open.
// Thread-safety: one owner thread; every call is a non-blocking send to the keeper.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

class Fence {
 public:
  // Forks the keeper. No lease is armed until the first RenewUntil.
  static Result<std::unique_ptr<Fence>> Start();
  // Closes the keeper's socket: it kills every process group it knows and exits; then reaps it.
  ~Fence();
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;

  // The groups are killed at `deadline` (this machine's steady clock) unless renewed before.
  void RenewUntil(std::chrono::steady_clock::time_point deadline);
  // A rank's process group to kill when the lease runs out; and one that has ended.
  void Add(pid_t pgid);
  void Remove(pid_t pgid);
  pid_t keeper() const { return keeper_; }

 private:
  Fence(int fd, pid_t keeper) : fd_(fd), keeper_(keeper) {}
  void Send(char op, int64_t value);

  int fd_;
  pid_t keeper_;
};

}  // namespace hyperpack::scheduler
