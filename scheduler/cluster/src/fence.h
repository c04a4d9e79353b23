// The agent's fence: a small process of its own that kills the agent's ranks when the agent stops
// renewing a lease. The agent renews it each time it hears from its server. Once the server has
// not been heard from for the lease, the server may be about to run those trials elsewhere, so
// these attempts must be gone; the keeper sees to that even when the agent itself cannot act
// (stopped with SIGSTOP, hung), which a timer inside the agent could not. When the agent dies
// the keeper kills what is left and exits.
//
// The keeper runs only async-signal-safe code (poll, recv, kill, clock_gettime, _exit), so it may
// be forked from a process with threads; it is best started before any.
// Thread-safety: one owner thread; every call is a non-blocking send to the keeper.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

class Fence {
 public:
  // Forks the keeper. No lease is armed until the first Renew.
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
