#include "serve.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "gpu.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"
#include "hyperpack/warm.h"

extern char** environ;

namespace hyperpack::trainer {
namespace {

int wake_write_fd = -1;

void OnStopSignal(int sig) {
  stop_signal.store(sig, std::memory_order_relaxed);
  const char byte = 1;
  if (wake_write_fd >= 0) {
    ssize_t ignored = write(wake_write_fd, &byte, 1);
    (void)ignored;
  }
}

// A byte per signal: what an earlier trial's signals left is emptied before the next trial.
void DrainWakePipe() {
  char buf[64];
  const int fd = stop_wake_fd.load();
  while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0) {
  }
}

// Without SA_RESTART: a trial waiting at its stop epoch wakes up to the signal.
void CatchStopSignals() {
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) == 0) {
    wake_write_fd = wake[1];
    stop_wake_fd.store(wake[0]);
  }
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool IsPacketSocket(int fd) {
  int type = 0;
  socklen_t len = sizeof(type);
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

// The trial's environment, in place of the last one's. putenv keeps pointers into `storage`.
void ReplaceEnvironment(const std::vector<std::string>& env, std::vector<std::string>* storage) {
  clearenv();
  *storage = env;
  for (std::string& entry : *storage)
    if (entry.find('=') != std::string::npos) putenv(entry.data());
}

void FlushAll() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
}

// Runs one trial with the descriptors it came with as stdout and stderr; how it ended.
warm::TrialEnd RunOne(const warm::RunRequest& request, int out, int err, int devnull, int served,
                      std::vector<std::string>* env_storage) {
  stop_signal.store(0, std::memory_order_relaxed);
  DrainWakePipe();
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  int code = 1;
  if (!request.workdir.empty() && chdir(request.workdir.c_str()) != 0) {
    std::cerr << "hyperpack-trainer: cannot enter trial.workdir '" << request.workdir
              << "': " << std::strerror(errno) << "\n";
  } else {
    ReplaceEnvironment(request.env, env_storage);
    // Said on stderr, so that a trial's log tells which process ran it.
    std::cerr << "hyperpack-trainer: warm process " << getpid() << ", trial " << served
              << " it serves\n";
    std::vector<std::string> args = request.argv;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    code = RunTrial(static_cast<int>(args.size()), argv.data());
  }
  FlushAll();
  // The blocks the trial freed go back to the GPU, for whatever runs on it next in another process.
  EmptyGpuCache();
  // The trial's output ends here: the runner reads end of file before it reads the end message.
  dup2(devnull, STDOUT_FILENO);
  dup2(devnull, STDERR_FILENO);
  if (const int sig = stop_signal.exchange(0, std::memory_order_relaxed))
    return {warm::TrialEnd::How::kSignaled, sig};
  return {warm::TrialEnd::How::kExited, code & 0xff};
}

}  // namespace

int Serve() {
  const int control = env::kControlFdNumber;
  if (!IsPacketSocket(control)) {
    std::cerr << "hyperpack-trainer " << warm::kServeFlag << ": file descriptor " << control
              << " must be the runner's packet socket; this mode is for hyperpack's runner\n";
    return 1;
  }
  CatchStopSignals();
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) return 1;
  // The process's own output goes nowhere: each trial brings its own.
  dup2(devnull, STDIN_FILENO);
  dup2(devnull, STDOUT_FILENO);
  dup2(devnull, STDERR_FILENO);
  std::vector<std::string> env_storage;
  int served = 0;
  for (;;) {
    std::vector<int> fds;
    auto message = warm::Receive(control, &fds);
    if (!message.ok()) {
      for (int fd : fds) close(fd);
      return 1;
    }
    if (!message->has_value()) return 0;  // the runner is done with this process
    auto request = warm::ParseRun(**message);
    // Anything else (a "continue" that came after its trial had stopped waiting) is dropped.
    // A third descriptor is the trial's attempt lock: held, by being open, until the trial ends.
    if (!request.ok() || fds.size() < 2 || fds.size() > 3) {
      for (int fd : fds) close(fd);
      continue;
    }
    const warm::TrialEnd end = RunOne(*request, fds[0], fds[1], devnull, ++served, &env_storage);
    for (int fd : fds) close(fd);
    if (!warm::Send(control, warm::FormatEnd(end)).ok()) return 1;
  }
}

}  // namespace hyperpack::trainer
