#include "launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"

namespace hyperpack::trainer {
namespace {

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

void SignalAll(const std::vector<pid_t>& children, int sig) {
  for (pid_t c : children)
    if (c > 0) kill(c, sig);
}

// Starts rank `r` of `nproc` as this program again, with the rendezvous on loopback `port`;
// its pid, or -1. The child gets back the signal mask `old`.
pid_t StartRank(int r, int nproc, const std::string& port, const sigset_t& old, char** argv) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  setenv(env::kRank, std::to_string(r).c_str(), 1);
  setenv(env::kLocalRank, std::to_string(r).c_str(), 1);
  setenv(env::kWorldSize, std::to_string(nproc).c_str(), 1);
  setenv(env::kLocalWorldSize, std::to_string(nproc).c_str(), 1);
  setenv(env::kMasterAddr, "127.0.0.1", 1);
  setenv(env::kMasterPort, port.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::cerr << "hyperpack-trainer: cannot re-run /proc/self/exe for rank " << r << "\n";
  _exit(1);
}

// Waits for every child, taking `set`'s signals synchronously: a stop signal or a failed rank
// stops the others (SIGTERM, then SIGKILL after a grace period). The gang's exit code: 0, 3
// when a rank exited 3 (an infeasible configuration, kept over other failures), else 1.
int WaitForRanks(std::vector<pid_t>& children, const sigset_t& set) {
  int result = 0;
  size_t running = children.size();
  bool stopping = false;
  timespec grace{5, 0};
  while (running > 0) {
    siginfo_t info;
    int sig = stopping ? sigtimedwait(&set, &info, &grace) : sigwaitinfo(&set, &info);
    if (sig < 0 && errno == EAGAIN) {  // the grace period is over
      SignalAll(children, SIGKILL);
      continue;
    }
    if (sig == SIGTERM || sig == SIGINT) {
      SignalAll(children, SIGTERM);
      stopping = true;
      if (result == 0) result = 1;
      continue;
    }
    // Reap whatever has exited.
    for (pid_t& c : children) {
      if (c <= 0) continue;
      int status = 0;
      if (waitpid(c, &status, WNOHANG) != c) continue;
      c = -1;
      --running;
      int code = ExitCode(status);
      if (code == 0) continue;
      if (code == 3 || result != 3) result = code == 3 ? 3 : 1;
      if (!stopping) {
        // One rank failed: the gang cannot finish.
        SignalAll(children, SIGTERM);
        stopping = true;
      }
    }
  }
  return result;
}

}  // namespace

int LaunchLocalRanks(int nproc, int argc, char** argv) {
  (void)argc;
  std::string port = std::to_string(FreeLoopbackPort());
  std::vector<pid_t> children;
  // SIGCHLD and the stop signals are taken synchronously below, so block them first.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &set, &old);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = StartRank(r, nproc, port, old, argv);
    if (pid < 0) {
      std::cerr << "hyperpack-trainer: cannot start rank " << r << "\n";
      SignalAll(children, SIGTERM);
      return 1;
    }
    children.push_back(pid);
  }
  const int result = WaitForRanks(children, set);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return result;
}

}  // namespace hyperpack::trainer
