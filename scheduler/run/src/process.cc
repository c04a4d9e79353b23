#include "hyperpack/scheduler/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace hyperpack::scheduler {

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

Result<Spawned> Spawn(const SpawnRequest& request) {
  int out[2], err[2], status[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Io("pipe: ", std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::Io("pipe: ", std::strerror(errno));
  }
  if (pipe2(status, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return Status::Io("pipe: ", std::strerror(errno));
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> envp;
  for (const std::string& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* argv[] = {"sh", "-c", request.command.c_str(), nullptr};
  const char* workdir = request.workdir.empty() ? nullptr : request.workdir.c_str();
  pid_t parent = getpid();
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], status[0], status[1], devnull}) close(fd);
    return Status::Io("fork: ", std::strerror(e));
  }
  if (pid == 0) {
    // Child. Report a failure before exec through the status pipe: (stage, errno).
    auto fail = [&](int stage) {
      int msg[2] = {stage, errno};
      ssize_t ignored = write(status[1], msg, sizeof(msg));
      (void)ignored;
      _exit(127);
    };
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the runner died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT}) signal(sig, SIG_DFL);
    if (workdir != nullptr && chdir(workdir) != 0) fail(1);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    // Nothing else of ours goes with the trial: not the database, not a socket (an agent's
    // connection held open by a trial would hide the agent's death from the server).
    // The status pipe stays until exec closes it (it is close-on-exec).
    const unsigned keep = static_cast<unsigned>(status[1]);
    bool closed = (keep <= 3 || syscall(SYS_close_range, 3u, keep - 1, 0) == 0) &&
                  syscall(SYS_close_range, keep + 1, ~0U, 0) == 0;
    if (!closed) {
      for (int fd = 3; fd < 1024; ++fd)
        if (fd != status[1]) close(fd);
    }
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    fail(2);
  }
  // Parent. Also set the group here: whichever of the two runs first, the group exists before
  // anyone signals it.
  setpgid(pid, pid);
  for (int fd : {out[1], err[1], status[1], devnull})
    if (fd >= 0) close(fd);
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = read(status[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close(status[0]);
  if (n == static_cast<ssize_t>(sizeof(msg))) {
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    close(out[0]);
    close(err[0]);
    if (msg[0] == 1)
      return Status::Invalid("cannot enter trial.workdir '", request.workdir,
                             "': ", std::strerror(msg[1]));
    return Status::Io("cannot run /bin/sh: ", std::strerror(msg[1]));
  }
  return Spawned{pid, out[0], err[0]};
}

}  // namespace hyperpack::scheduler
