#include "hyperpack/scheduler/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <initializer_list>

#include "hyperpack/env_vars.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/text.h"

extern char** environ;

namespace hyperpack::scheduler {

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

std::optional<std::string> CompanionTrainerDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  for (const fs::path& dir : {self.parent_path(), self.parent_path().parent_path() / "trainer"})
    if (fs::exists(dir / "hyperpack-trainer", ec)) return dir.lexically_normal().string();
  return std::nullopt;
}

std::optional<std::string> CompanionShimPath(const std::string& tool) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path up = self.parent_path().parent_path();
  for (const fs::path& shims : {up / "share" / "hyperpack" / "shims", up / "shims"}) {
    if (fs::exists(shims / tool / tool / "__init__.py", ec) &&
        fs::exists(shims / "_common" / "hyperpack_shim.py", ec))
      return (shims / tool).lexically_normal().string() + ":" +
             (shims / "_common").lexically_normal().string();
  }
  return std::nullopt;
}

std::map<std::string, std::string> EnvironmentMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> map;
  for (const std::string& entry : entries) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) map[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return map;
}

namespace {

// A spawn's pipes, all close-on-exec, [0] the read end: the trial's stdout and stderr, and the
// child's report of a failure before exec.
struct Pipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int status[2] = {-1, -1};
  int control[2] = {-1, -1};  // [0] the runner's, [1] the child's; a socket pair, when asked for
  // [0] the runner's, [1] the child's: one byte says the child may exec, once the runner has seen
  // its pid (Spawn's before_run). A socket, so that the runner's send cannot raise SIGPIPE.
  int go[2] = {-1, -1};
};

// What the child reads between fork and exec.
struct ChildPlan {
  std::vector<char*> envp;
  const char* argv[4];
  const char* workdir;  // nullptr: stay in the runner's
  pid_t parent;
  int devnull;  // -1 when /dev/null could not be opened
  // The attempt lock (SpawnRequest::lock_path), absolute; empty: none. And what the child says on
  // its stderr, made before the fork.
  std::string lock_path;
  int64_t lock_wait_ns = 0;
  std::string waiting, gave_up, unlockable;
};

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

// The stage the child reports through the status pipe, with errno, when it cannot exec.
enum ChildFailure : int { kCannotChdir = 1, kCannotExec = 2 };

Status OpenPipes(Pipes& p) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p.go) != 0)
    return Status::Io("socketpair: ", std::strerror(errno));
  if (pipe2(p.out, O_CLOEXEC) != 0) {
    CloseAll({p.go[0], p.go[1]});
    return Status::Io("pipe: ", std::strerror(errno));
  }
  if (pipe2(p.err, O_CLOEXEC) != 0) {
    CloseAll({p.go[0], p.go[1], p.out[0], p.out[1]});
    return Status::Io("pipe: ", std::strerror(errno));
  }
  if (pipe2(p.status, O_CLOEXEC) != 0) {
    CloseAll({p.go[0], p.go[1], p.out[0], p.out[1], p.err[0], p.err[1]});
    return Status::Io("pipe: ", std::strerror(errno));
  }
  return Status::Ok();
}

// A socket rather than a pipe: the runner writes with MSG_NOSIGNAL, so that a trial that has
// exited costs an error, not a SIGPIPE.
Status OpenControl(Pipes& p, bool packets) {
  const int type = (packets ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC;
  if (socketpair(AF_UNIX, type, 0, p.control) == 0) return Status::Ok();
  const int e = errno;
  CloseAll({p.go[0], p.go[1], p.out[0], p.out[1], p.err[0], p.err[1], p.status[0], p.status[1]});
  return Status::Io("socketpair: ", std::strerror(e));
}

ChildPlan PlanChild(const SpawnRequest& request) {
  ChildPlan plan;
  for (const std::string& e : request.env) plan.envp.push_back(const_cast<char*>(e.c_str()));
  plan.envp.push_back(nullptr);
  plan.argv[0] = "sh";
  plan.argv[1] = "-c";
  plan.argv[2] = request.command.c_str();
  plan.argv[3] = nullptr;
  plan.workdir = request.workdir.empty() ? nullptr : request.workdir.c_str();
  plan.parent = getpid();
  plan.devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!request.lock_path.empty()) {
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(request.lock_path, ec);
    plan.lock_path = ec ? request.lock_path : abs.string();
    const double wait = std::max(0.0, request.lock_wait_s);
    plan.lock_wait_ns = static_cast<int64_t>(std::llround(wait * 1e9));
    const std::string secs = FormatShort(wait, 6);
    plan.waiting = StrCat("hyperpack: an earlier attempt of this trial still runs (it holds ",
                          plan.lock_path, "); waiting up to ", secs, " s for it to end\n");
    plan.gave_up = StrCat("hyperpack: the earlier attempt of this trial still ran after ", secs,
                          " s (it holds ", plan.lock_path, "); this attempt ran nothing\n");
    plan.unlockable =
        StrCat("hyperpack: cannot open ", plan.lock_path, "; running without the attempt lock\n");
  }
  return plan;
}

// Child side, below: async-signal-safe calls only, nothing allocated.

void Say(const std::string& text) {
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

// `status_fd` is -1 once the runner has stopped listening (the child waited for its lock): the
// failure then goes to the trial's stderr.
[[noreturn]] void ReportAndExit(int status_fd, ChildFailure stage) {
  int msg[2] = {stage, errno};
  static constexpr char kCannotRun[] = "hyperpack: cannot run /bin/sh\n";
  ssize_t ignored = status_fd >= 0 ? write(status_fd, msg, sizeof(msg))
                                   : write(STDERR_FILENO, kCannotRun, sizeof(kCannotRun) - 1);
  (void)ignored;
  _exit(127);
}

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Whether flock(LOCK_NB) on `fd` ended the wait: taken, or a file system without locks.
bool LockSettled(int fd) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  return errno != EWOULDBLOCK && errno != EINTR;
}

// The attempt lock (SpawnRequest::lock_path), on a descriptor the command inherits, numbered
// high, out of the way of the ones a script numbers itself. Taken at once, the runner hears of a
// failed exec as before; held by another, the child says so, lets the runner go on (closing the
// status pipe, as exec would) and polls until it is free or its time is up.
void TakeAttemptLock(const ChildPlan& plan, int* status_fd) {
  if (plan.lock_path.empty()) return;
  const int opened = open(plan.lock_path.c_str(), O_RDWR | O_CREAT | O_NOCTTY | O_CLOEXEC, 0644);
  const int fd = opened < 0 ? -1 : fcntl(opened, F_DUPFD, 100);  // not close-on-exec
  if (opened >= 0) close(opened);
  if (fd < 0) return Say(plan.unlockable);
  if (LockSettled(fd)) return;
  Say(plan.waiting);
  close(*status_fd);
  *status_fd = -1;
  const int64_t deadline = MonotonicNs() + plan.lock_wait_ns;
  const timespec step{0, 50000000};
  for (;;) {
    nanosleep(&step, nullptr);
    if (LockSettled(fd)) return;
    if (MonotonicNs() >= deadline) {
      Say(plan.gave_up);
      _exit(kLockedOutExit);
    }
  }
}

void ResetSignals() {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT}) signal(sig, SIG_DFL);
}

// Nothing else of ours goes with the trial: not the database, not a socket (an agent's
// connection held open by a trial would hide the agent's death from the server).
// The status pipe stays until exec closes it (it is close-on-exec), and so does the control
// socket (not close-on-exec) where there is one.
void CloseAllBut(int keep_fd, int control_fd) {
  const unsigned keep = static_cast<unsigned>(keep_fd);
  const unsigned first = control_fd >= 0 ? static_cast<unsigned>(control_fd) + 1 : 3u;
  bool closed = (keep <= first || syscall(SYS_close_range, first, keep - 1, 0) == 0) &&
                syscall(SYS_close_range, keep + 1, ~0U, 0) == 0;
  if (!closed) {
    for (int fd = static_cast<int>(first); fd < 1024; ++fd)
      if (fd != keep_fd) close(fd);
  }
}

[[noreturn]] void RunChild(const Pipes& p, const ChildPlan& plan) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != plan.parent) _exit(127);  // the runner died before prctl took effect
  // Nothing runs until the runner has seen this process (Spawn's before_run); without its byte
  // (the runner died first) nothing runs at all.
  close(p.go[0]);
  char go = 0;
  ssize_t got;
  do {
    got = read(p.go[1], &go, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) _exit(127);
  ResetSignals();
  if (plan.workdir != nullptr && chdir(plan.workdir) != 0) ReportAndExit(p.status[1], kCannotChdir);
  if (plan.devnull >= 0) dup2(plan.devnull, STDIN_FILENO);
  dup2(p.out[1], STDOUT_FILENO);
  dup2(p.err[1], STDERR_FILENO);
  int status_fd = p.status[1];
  int control_fd = -1;
  if (p.control[1] >= 0) {
    // The control socket goes to its agreed number; the status pipe moves out of the way first.
    control_fd = env::kControlFdNumber;
    if (status_fd == control_fd) status_fd = fcntl(status_fd, F_DUPFD_CLOEXEC, control_fd + 1);
    if (p.control[1] == control_fd) {
      fcntl(control_fd, F_SETFD, 0);
    } else {
      dup2(p.control[1], control_fd);  // the copy is not close-on-exec
    }
  }
  CloseAllBut(status_fd, control_fd);
  TakeAttemptLock(plan, &status_fd);
  execve("/bin/sh", const_cast<char* const*>(plan.argv), plan.envp.data());
  ReportAndExit(status_fd, kCannotExec);
}

// Parent side: the status pipe closes at a successful exec, or brings the child's report.
Result<Spawned> AwaitExec(const SpawnRequest& request, pid_t pid, const Pipes& p, int devnull,
                          const std::function<void(pid_t)>& before_run) {
  // Also set the group here: whichever of the two runs first, the group exists before anyone
  // signals it, and before before_run hands it on.
  setpgid(pid, pid);
  if (before_run) before_run(pid);
  const char go = 1;
  (void)send(p.go[0], &go, 1, MSG_NOSIGNAL);  // a child that is gone already fails below
  CloseAll({p.go[0], p.go[1], p.out[1], p.err[1], p.status[1], p.control[1], devnull});
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = read(p.status[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close(p.status[0]);
  if (n == static_cast<ssize_t>(sizeof(msg))) {
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    CloseAll({p.out[0], p.err[0], p.control[0]});
    if (msg[0] == kCannotChdir)
      return Status::Invalid("cannot enter trial.workdir '", request.workdir,
                             "': ", std::strerror(msg[1]));
    return Status::Io("cannot run /bin/sh: ", std::strerror(msg[1]));
  }
  return Spawned{pid, p.out[0], p.err[0], p.control[0]};
}

}  // namespace

Result<Spawned> Spawn(const SpawnRequest& request, const std::function<void(pid_t)>& before_run) {
  Pipes p;
  HP_RETURN_IF_ERROR(OpenPipes(p));
  if (request.control) HP_RETURN_IF_ERROR(OpenControl(p, request.control_packets));
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  const ChildPlan plan = PlanChild(request);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    CloseAll({p.go[0], p.go[1], p.out[0], p.out[1], p.err[0], p.err[1], p.status[0], p.status[1],
              p.control[0], p.control[1], plan.devnull});
    return Status::Io("fork: ", std::strerror(e));
  }
  if (pid == 0) RunChild(p, plan);
  return AwaitExec(request, pid, p, plan.devnull, before_run);
}

RankExit RankExitFromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return RankExit::Signaled(WTERMSIG(status));
  return RankExit::Exited(WEXITSTATUS(status));
}

}  // namespace hyperpack::scheduler
