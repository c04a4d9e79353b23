// What the dashboard's and the browser's tests share: a child process whose output the test reads
// line by line as it comes (no polling: reads block, with a deadline), killed with its whole
// process group; and a minimal HTTP/1.1 GET over loopback.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace hyperpack::testing {

// A child in its own process group; its stdout and stderr come through one pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, const std::string& cwd = "") {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      ExecIn(argv, cwd);
    }
    close(fds[1]);
    fd_ = fds[0];
  }
  ~Child() {
    Stop(SIGKILL);
    if (fd_ >= 0) close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of output holding `needle` (earlier lines are kept in output()); nullopt at EOF
  // or when `seconds` pass first.
  std::optional<std::string> WaitForLine(const std::string& needle, double seconds = 30) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    for (;;) {
      for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
        std::string line = pending_.substr(0, nl);
        pending_.erase(0, nl + 1);
        output_ += line + "\n";
        if (line.find(needle) != std::string::npos) return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || fd_ < 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      pending_.append(buf, static_cast<size_t>(n));
    }
  }
  // Every line read so far; after Stop() or Wait(), all the child wrote.
  const std::string& output() const { return output_; }

  // Signals the whole group and reaps the child; its exit code (128 + signal when killed).
  int Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return exit_code_;
    kill(-pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    if (sig != SIGKILL) kill(-pid_, SIGKILL);  // what the group left behind
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    Drain();
    return exit_code_;
  }
  // Waits for the child to exit by itself; its exit code.
  int Wait() {
    if (pid_ <= 0) return exit_code_;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    Drain();
    return exit_code_;
  }

 private:
  // The rest of the output, up to EOF (or a second without any, should a grandchild hold the
  // pipe open).
  void Drain() {
    while (WaitForLine("\n", 1)) {
    }
    output_ += pending_;
    pending_.clear();
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int exit_code_ = -1;
  std::string pending_, output_;
};

struct HttpReply {
  int status = 0;  // 0: no reply
  std::string headers, body;
};

// Sends `request` (raw bytes) to 127.0.0.1:`port` and reads the reply: Content-Length bytes of
// body where the reply says how many (a server may keep the connection open), else until it
// closes; 30 s at most for each read.
inline HttpReply HttpRaw(int port, const std::string& request) {
  HttpReply r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval limit{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return r;
  }
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) {
    all.append(buf, static_cast<size_t>(n));
    const size_t head = all.find("\r\n\r\n");
    if (head == std::string::npos) continue;
    std::string lower = all.substr(0, head);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = lower.find("\r\ncontent-length:");
    if (at != std::string::npos &&
        all.size() >= head + 4 + std::stoul(lower.substr(at + 17, lower.find('\r', at + 2))))
      break;
  }
  close(fd);
  const size_t end = all.find("\r\n\r\n");
  if (all.compare(0, 9, "HTTP/1.1 ") != 0 || end == std::string::npos) return r;
  r.status = std::stoi(all.substr(9, 3));
  r.headers = all.substr(0, end);
  r.body = all.substr(end + 4);
  return r;
}

inline HttpReply HttpGet(int port, const std::string& target, const std::string& extra = "") {
  return HttpRaw(port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra +
                           "Connection: close\r\n\r\n");
}

}  // namespace hyperpack::testing
