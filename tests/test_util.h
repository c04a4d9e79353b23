// Helpers shared by the tests: temporary directories, files, child processes.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace hyperpack::testing {

// A fresh directory under $TMPDIR, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hyperpack-test-XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A loopback TCP port that was free a moment ago (bound to port 0, read back, closed); 0 when no
// socket could be had.
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

// A study file for a test, from the parts the test is about, so that tests do not each write the
// same header by hand. StudyYaml("s").Command("sh " + script).str() is
//   name: s
//   objective: {metric: loss, direction: minimize}
//   search_space: {x: {type: float, low: 0, high: 1}}
//   trial: {command: "sh /tmp/.../trial.sh"}
// four lines, each with a newline, to which a test appends its own sections. With TrialBlock() the
// trial is a block, "trial:\n  command: CMD\n" (CMD as given), that a test may go on with keys of
// its own ("  workdir: ../runs\n").
class StudyYaml {
 public:
  explicit StudyYaml(std::string name = "demo") : name_(std::move(name)) {}
  StudyYaml& Objective(std::string metric, std::string direction = "minimize") {
    metric_ = std::move(metric);
    direction_ = std::move(direction);
    return *this;
  }
  // The search space in YAML's flow style: "{lr: {type: float, low: 0.001, high: 0.1}}".
  StudyYaml& Space(std::string flow) {
    space_ = std::move(flow);
    return *this;
  }
  // The trial's command, written double-quoted (backslashes and quotes escaped).
  StudyYaml& Command(const std::string& command) {
    block_ = false;
    command_.clear();
    for (char c : command) {
      if (c == '"' || c == '\\') command_ += '\\';
      command_ += c;
    }
    return *this;
  }
  // The trial as a block with `command` as written (a plain or quoted YAML scalar).
  StudyYaml& TrialBlock(std::string command) {
    block_ = true;
    command_ = std::move(command);
    return *this;
  }
  std::string str() const {
    return "name: " + name_ + "\nobjective: {metric: " + metric_ + ", direction: " + direction_ +
           "}\nsearch_space: " + space_ +
           (block_ ? "\ntrial:\n  command: " + command_ + "\n"
                   : "\ntrial: {command: \"" + command_ + "\"}\n");
  }

 private:
  std::string name_;
  std::string metric_ = "loss", direction_ = "minimize";
  std::string space_ = "{x: {type: float, low: 0, high: 1}}";
  std::string command_ = "true";
  bool block_ = false;
};

inline void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  std::ofstream(path, std::ios::trunc) << text;
  if (executable) std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// Shell lines for a trial script: the trial marks itself in `folder` (made here), then waits until
// `n` trials have (at most 10 s), so that a test knows `n` ran at once without timing them.
inline std::string ShellBarrier(const std::filesystem::path& folder, int n) {
  std::filesystem::create_directories(folder);
  const std::string f = folder.string();
  return "touch " + f + "/$HYPERPACK_TRIAL_ID\ni=0\nwhile [ \"$(ls " + f + " | wc -l)\" -lt " +
         std::to_string(n) + " ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done\n";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// In a forked child: changes to `cwd` (when not empty) and becomes `argv`; exits 126 or 127 when
// it cannot.
[[noreturn]] inline void ExecIn(const std::vector<std::string>& argv, const std::string& cwd) {
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Whether process `pid` has exited (or is a zombie) within `timeout_ms`, waiting on its pidfd
// rather than on time; a pid that is already gone counts as exited. It does not reap a child.
inline bool ExitsWithin(pid_t pid, int timeout_ms) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  const bool exited = poll(&p, 1, timeout_ms) == 1;
  close(fd);
  return exited;
}

// Starts `argv` in `cwd` in the background, stdout and stderr to `out_path`; the caller waits.
inline pid_t StartInBackground(const std::vector<std::string>& argv, const std::string& cwd,
                               const std::string& out_path) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    ExecIn(argv, cwd.empty() ? "." : cwd);
  }
  return pid;
}

// Runs `argv` to completion with stdout and stderr captured.
struct Ran {
  int exit_code = -1;
  std::string out, err;
};

inline Ran RunCommand(const std::vector<std::string>& argv, const std::string& cwd = "") {
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  std::string out_path = (dir / ("hp-out-" + std::to_string(getpid()))).string();
  std::string err_path = (dir / ("hp-err-" + std::to_string(getpid()))).string();
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    ExecIn(argv, cwd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Ran r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

#ifdef HYPERPACK_SOURCE_DIR
// The python that imports Optuna `release` (3.1, 4.6, 5.0: tests/python/optuna_python): `path`
// when found; else `skip` (the release is not at hand) or an error, the reason in `why`.
struct OptunaPython {
  std::string path;
  bool skip = false;
  std::string why;
};

inline OptunaPython FindOptunaPython(const std::string& release) {
  Ran found =
      RunCommand({std::string(HYPERPACK_SOURCE_DIR) + "/tests/python/optuna_python", release});
  OptunaPython p;
  p.skip = found.exit_code == 77;
  p.why = found.err;
  if (found.exit_code == 0) p.path = found.out.substr(0, found.out.find('\n'));
  return p;
}
#endif

// A child process whose stdout (and stderr) the test reads line by line.
struct PipedChild {
  pid_t pid = -1;
  FILE* out = nullptr;

  std::string Line() {
    char buf[4096];
    if (!out || !fgets(buf, sizeof(buf), out)) return "";
    return buf;
  }
  // Reads lines until one contains `text`; all of them are returned (empty: the child ended).
  std::string Until(const std::string& text) {
    std::string seen;
    while (true) {
      std::string l = Line();
      if (l.empty()) return "";
      seen += l;
      if (l.find(text) != std::string::npos) return seen;
    }
  }
  // Reads to the end of its output and waits for it; its wait status.
  int Wait() {
    while (!Line().empty()) {
    }
    return Reap();
  }
  int Stop(int sig = SIGTERM) {
    if (pid <= 0) return -1;
    kill(pid, sig);
    return Reap();
  }
  int Reap() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    if (out) fclose(out);
    out = nullptr;
    return status;
  }
};

inline PipedChild StartPiped(const std::vector<std::string>& args, const std::string& cwd) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fdopen(fds[0], "r")};
}

}  // namespace hyperpack::testing
