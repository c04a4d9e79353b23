#include "command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "hyperpack/text.h"

extern char** environ;

namespace hyperpack::scheduler::slurm {
namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
};

// Reads the two pipes into result's out and err (each to kMaxCommandOutput; the rest is read and
// dropped) until both close; false when `timeout_s` passed first.
bool ReadUntil(int out_fd, int err_fd, double timeout_s, CommandOutput* result) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result->out, &result->err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        // Past the limit the rest is read and dropped, so the command never blocks on its pipe.
        const size_t room = kMaxCommandOutput - std::min(kMaxCommandOutput, sinks[i]->size());
        sinks[i]->append(buf, std::min(room, static_cast<size_t>(got)));
        if (static_cast<size_t>(got) > room) result->truncated = true;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  return true;
}

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) return Status::Internal("RunCommand: no command");
  Pipe out, err;
  if (pipe2(out.fd, O_CLOEXEC) != 0 || pipe2(err.fd, O_CLOEXEC) != 0)
    return Status::Io("pipe: ", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return Status::Unavailable("cannot run ", argv[0], ": ", std::strerror(rc),
                               rc == ENOENT ? " (is Slurm's client installed and on PATH?)" : "");
  close(out.fd[1]);
  out.fd[1] = -1;
  close(err.fd[1]);
  err.fd[1] = -1;

  CommandOutput result;
  const bool timed_out = !ReadUntil(out.fd[0], err.fd[0], timeout_s, &result);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Status::Unavailable(argv[0], " did not answer within ", FormatShort(timeout_s, 3),
                               " s (is slurmctld up?)");
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace hyperpack::scheduler::slurm
