// Starting a trial's process: fork and exec /bin/sh -c COMMAND in a new process group, with its
// stdout and stderr on pipes and its stdin on /dev/null. The child dies with the runner
// (PR_SET_PDEATHSIG), and runs nothing of its command before the runner has seen its process
// group (`before_run`, where the runner tells its fence). On request it also gets one end of a
// socket pair as file descriptor env::kControlFdNumber, the runner keeping the other, to be told
// lines (env::kControlFd). On request (SpawnRequest::lock_path) the child holds a lock that an
// attempt of the same trial still running holds too: it runs nothing until that one has ended.
// Thread-safety: Spawn may be called from any thread; the child runs only async-signal-safe
// code between fork and exec.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

struct RankExit;  // study_controller.h

// How a child ended, from waitpid's status: its exit code, or the signal that killed it.
RankExit RankExitFromWaitStatus(int status);

struct SpawnRequest {
  std::string command;           // for /bin/sh -c
  std::string workdir;           // empty: the runner's
  std::vector<std::string> env;  // complete environment, NAME=VALUE
  bool control = false;          // a socket at env::kControlFdNumber
  bool control_packets = false;  // with `control`: a SOCK_SEQPACKET socket, not a stream
  // Not empty: these words run the same program as `command` (hyperpack-trainer), and a warm
  // trainer may serve the rank instead of a new process (LocalExecutor; hyperpack/warm.h).
  std::vector<std::string> warm_argv;
  // Not empty: before its command runs, the child takes an exclusive flock on this file (made if
  // missing) and passes it on to the command, so that it is held until the command and everything
  // that inherited it have ended, fence or no fence. Held already (an earlier attempt of the trial
  // still runs), the child says so on stderr and waits up to lock_wait_s, then exits
  // kLockedOutExit having run nothing. A file system without locks runs the command unlocked.
  std::string lock_path;
  double lock_wait_s = 60;
};

// The exit code of a child that gave up waiting for SpawnRequest::lock_path (sysexits' TEMPFAIL).
inline constexpr int kLockedOutExit = 75;

struct Spawned {
  pid_t pid = -1;  // also the process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
  int control_fd = -1;  // the runner's end of the control socket, when asked for
};

// Errors: the workdir cannot be entered, /bin/sh cannot be run, or no process could be made.
// `before_run`, when given, is called with the child's pid (its process group) after the fork and
// before the child may exec: the command cannot have started, let alone started anything of its
// own, before it returns. A runner that dies in between leaves a child that exits unrun.
Result<Spawned> Spawn(const SpawnRequest& request,
                      const std::function<void(pid_t)>& before_run = nullptr);

// The environment of this process, NAME=VALUE.
std::vector<std::string> CurrentEnvironment();

// NAME=VALUE entries by name, split at the first '='. An entry without '=' is left out, a name
// given twice keeps its last value, and an empty name is kept (as execve would pass it on).
std::map<std::string, std::string> EnvironmentMap(const std::vector<std::string>& entries);

// The folder of the hyperpack-trainer that came with this program: beside it (installed), or
// ../trainer/ (a build tree, build/cli/ and build/trainer/); nullopt when there is none. Trials
// find it first on their PATH, so that a study's `hyperpack-trainer ...` runs the matching one
// from a checkout and from an installation alike.
std::optional<std::string> CompanionTrainerDir();

// The PYTHONPATH entries of the Python stand-in for `tool`'s client that came with this program:
// its folder and the one of what the stand-ins share (_common), under ../share/hyperpack/shims/
// installed or ../shims/ in a build tree, as "TOOL_DIR:COMMON_DIR"; nullopt when there is none.
std::optional<std::string> CompanionShimPath(const std::string& tool);

}  // namespace hyperpack::scheduler
