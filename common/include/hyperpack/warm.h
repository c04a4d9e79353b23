// The warm trainer's protocol: how a runner hands trials, one after another, to one
// `hyperpack-trainer --serve` process that keeps libtorch and the data loaded between them.
//
// The runner starts the process with one end of a SOCK_SEQPACKET socket pair at
// env::kControlFdNumber; every message is one packet:
//   runner -> trainer  "run " + JSON {"argv": [...], "env": ["NAME=VALUE", ...], "workdir": ...}
//                      with the trial's stdout and stderr attached (two descriptors,
//                      SCM_RIGHTS), and a third where the trial has an attempt lock (a file
//                      the runner holds a flock on: the trainer keeps it open, and so held,
//                      until the trial ends); "continue N" while a trial waits at its stop
//                      epoch.
//   trainer -> runner  "exit N" or "signal N": the trial ended as its own process would have
//                      (an exit code, or the signal that would have ended it). Its stdout and
//                      stderr are closed before this is sent.
// End of file on the socket ends the process. A trainer that dies mid-trial ends that trial with
// its own wait status. A SIGTERM or SIGINT to the process ends the running trial only.
// Thread-safety: pure functions; Send and Receive are safe on distinct sockets.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::warm {

inline constexpr char kServeFlag[] = "--serve";
// The largest packet either side sends or accepts; a trial whose request is larger runs in its own
// process instead.
inline constexpr size_t kMaxMessage = 64 * 1024;

struct RunRequest {
  std::vector<std::string> argv;  // argv[0] is the program's name
  std::vector<std::string> env;   // the trial's complete environment
  std::string workdir;            // empty: the serving process's own
};

std::string FormatRun(const RunRequest& request);
// Errors: not a "run" message, or its JSON is not the shape above.
Result<RunRequest> ParseRun(std::string_view message);

// How a served trial ended.
struct TrialEnd {
  enum class How { kExited, kSignaled };
  How how = How::kExited;
  int number = 0;  // the exit code or the signal
  bool operator==(const TrialEnd&) const = default;
};
std::string FormatEnd(const TrialEnd& end);
std::optional<TrialEnd> ParseEnd(std::string_view message);

// The words of `command` when it runs hyperpack-trainer (by any path) with plain words only: no
// quotes, variables, redirections or other shell syntax, which a warm process could not honour.
std::optional<std::vector<std::string>> TrainerArgv(std::string_view command);

// One packet on `socket`, with `fds` attached. Errors: the socket's, or a message over
// kMaxMessage. Does not block when `nonblocking`.
Status Send(int socket, std::string_view message, std::span<const int> fds = {},
            bool nonblocking = false);
// The next packet, blocking; the descriptors attached are appended to `fds` (close-on-exec).
// nullopt: end of file. Interrupted calls are retried. Errors: the socket's, or a packet cut
// short (it was over kMaxMessage, or carried too many descriptors).
Result<std::optional<std::string>> Receive(int socket, std::vector<int>* fds);

}  // namespace hyperpack::warm
