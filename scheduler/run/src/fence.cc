#include "hyperpack/scheduler/fence.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace hyperpack::scheduler {
namespace {

// One message to the keeper; a SOCK_SEQPACKET socket keeps their boundaries.
struct Message {
  char op;        // 'R' renew (value: the deadline, CLOCK_MONOTONIC ms), 'A' add, 'D' drop (a pgid)
  int64_t value;
};

// More ranks than one owner runs at once; past this a group is not fenced (never reached in
// practice).
constexpr int kMaxGroups = 4096;

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The keeper: async-signal-safe calls only, no allocation.
[[noreturn]] void Keep(int fd) {
  // Nothing of the owner's stays open here: a pipe a test or a user reads to its end, or an
  // agent's connection whose closing tells its server that it died, must close when the owner goes.
  const unsigned keep = static_cast<unsigned>(fd);
  const bool closed = (keep == 0 || syscall(SYS_close_range, 0u, keep - 1, 0u) == 0) &&
                      syscall(SYS_close_range, keep + 1, ~0U, 0u) == 0;
  if (!closed) {  // a kernel before close_range (5.9)
    for (int other = 0; other < 1024; ++other)
      if (other != fd) close(other);
  }
  // A Ctrl-C or SIGTERM meant for the owner's process group is the owner's to handle; the keeper
  // goes when the owner does.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, nullptr);
  sigaction(SIGTERM, &ignore, nullptr);
  static pid_t groups[kMaxGroups];
  int n = 0;
  int64_t deadline = -1;
  auto kill_all = [&] {
    for (int i = 0; i < n; ++i) kill(-groups[i], SIGKILL);
    n = 0;
  };
  while (true) {
    int timeout = -1;
    if (deadline >= 0) {
      int64_t left = deadline - NowMs();
      timeout = left <= 0 ? 0 : static_cast<int>(left > 1 << 30 ? 1 << 30 : left);
    }
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {  // the lease ran out
      kill_all();
      deadline = -1;
      continue;
    }
    Message m{};
    ssize_t k = r < 0 ? -1 : recv(fd, &m, sizeof(m), 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {  // the owner is gone
      kill_all();
      _exit(0);
    }
    if (k != sizeof(m)) continue;
    if (m.op == 'R') {
      deadline = m.value;
    } else if (m.op == 'A' && n < kMaxGroups && m.value > 1) {
      groups[n++] = static_cast<pid_t>(m.value);
    } else if (m.op == 'D') {
      for (int i = 0; i < n; ++i)
        if (groups[i] == m.value) groups[i--] = groups[--n];
    }
  }
}

}  // namespace

Result<std::unique_ptr<Fence>> Fence::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    return Status::Io("cannot make the fence's socket: ", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::Io("cannot start the fence process: ", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    Keep(fds[1]);
  }
  close(fds[1]);
  return std::unique_ptr<Fence>(new Fence(fds[0], pid));
}

Fence::~Fence() {
  close(fd_);
  int status = 0;
  while (waitpid(keeper_, &status, 0) < 0 && errno == EINTR) {
  }
}

void Fence::Send(char op, int64_t value) {
  Message m{op, value};
  // Never blocks the owner; a lost message at worst leaves a group unfenced or a lease short.
  (void)send(fd_, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
}

// libstdc++'s steady_clock is CLOCK_MONOTONIC, the keeper's clock.
void Fence::RenewUntil(std::chrono::steady_clock::time_point deadline) {
  Send('R', std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch())
                .count());
}
void Fence::Add(pid_t pgid) { Send('A', pgid); }
void Fence::Remove(pid_t pgid) { Send('D', pgid); }

}  // namespace hyperpack::scheduler
