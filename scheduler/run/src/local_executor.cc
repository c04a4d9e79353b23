#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "hyperpack/env_vars.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/fence.h"
#include "hyperpack/warm.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;

// After a rank's process has exited, a descendant that left its process group could still hold
// the pipes open; its output is waited for this long at most.
constexpr auto kDrainAfterExit = std::chrono::seconds(2);
// A line longer than this is cut (its end replaced by a marker saying how much), so that output
// without newlines cannot take the memory of the runner, and a line, even escaped as JSON six
// bytes for one, fits a frame of the agents' protocol.
constexpr size_t kMaxLine = 64 * 1024;

// What is kept of a line being read: its first kMaxLine bytes and how many more there were.
struct PartialLine {
  std::string text;
  size_t dropped = 0;

  void Add(char c) {
    if (text.size() < kMaxLine) {
      text += c;
    } else {
      ++dropped;
    }
  }
  bool empty() const { return text.empty() && dropped == 0; }
  // The line as delivered, then cleared.
  std::string Take() {
    std::string line = std::move(text);
    if (dropped > 0) line += " [line cut: " + std::to_string(dropped) + " more bytes]";
    text.clear();
    dropped = 0;
    return line;
  }
};

struct Proc {
  explicit Proc(asio::io_context& io) : out(io), err(io), drain(io) {}
  ~Proc() { CloseControl(); }
  void CloseControl() {
    if (control >= 0) close(control);
    control = -1;
  }
  pid_t pid = -1;     // the rank's process group: its own, or its warm trainer's
  bool warm = false;  // served by a warm trainer: its end comes as a message, not a SIGCHLD
  int control = -1;   // the runner's end of the rank's control socket (not for a warm rank)
  asio::posix::stream_descriptor out, err;
  std::array<char, 8192> out_buf{}, err_buf{};
  PartialLine out_line, err_line;
  bool exited = false, reported = false;
  int status = 0;
  bool out_open = true, err_open = true;
  asio::steady_timer drain;
};

// A warm hyperpack-trainer (--serve): one process that runs trial after trial. Its own stdout and
// stderr are read and dropped (it points them at /dev/null at once); each trial brings its own.
struct WarmTrainer {
  explicit WarmTrainer(asio::io_context& io) : control(io), out(io), err(io) {}
  pid_t pid = -1;
  std::string key;  // what a trial must share with it to be served by it
  asio::posix::stream_descriptor control, out, err;
  std::array<char, 512> drop{};
  std::optional<RankId> serving;
  bool exited = false;
};

// Trials are served by the same warm trainer only where the program, the folder it was named from
// and the GPUs it sees (fixed once CUDA starts) are the same.
std::string WarmKey(const SpawnRequest& request) {
  std::string gpus;
  for (const std::string& e : request.env)
    if (e.rfind(std::string(env::kCudaVisibleDevices) + "=", 0) == 0) gpus = e;
  return request.warm_argv.front() + '\0' + request.workdir + '\0' + gpus;
}

std::string ShellQuoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A trial's end as the wait status its own process would have had.
int WaitStatusOf(const warm::TrialEnd& end) {
  return end.how == warm::TrialEnd::How::kSignaled ? end.number : (end.number & 0xff) << 8;
}

class LocalExecutor : public Executor {
 public:
  LocalExecutor(asio::io_context& io, Callbacks cb, Fence* fence)
      : io_(io), cb_(std::move(cb)), sigchld_(io, SIGCHLD), fence_(fence) {
    if (!fence_) {
      // Without a keeper (no process could be made) a trial still dies with this process, only
      // what it started does not.
      if (auto own = Fence::Start(); own.ok()) own_fence_ = std::move(*own);
      fence_ = own_fence_.get();
    }
    Wait();
  }

  void SetCallbacks(Callbacks cb) override { cb_ = std::move(cb); }

  ~LocalExecutor() override { StopWarmTrainers(); }

  Status Start(RankId id, int, const SpawnRequest& request) override {
    // A warm trainer where one can serve it; should that fail, a process of its own as always.
    if (!request.warm_argv.empty() && StartWarm(id, request).ok()) return Status::Ok();
    auto spawned = SpawnFenced(request);
    if (!spawned.ok()) return spawned.status();
    auto p = std::make_shared<Proc>(io_);
    p->pid = spawned->pid;
    p->out.assign(spawned->stdout_fd);
    p->err.assign(spawned->stderr_fd);
    p->control = spawned->control_fd;
    procs_[id] = p;
    if (cb_.on_started) cb_.on_started(id, p->pid);
    Read(id, p, false);
    Read(id, p, true);
    return Status::Ok();
  }

  void Signal(RankId id, int signal) override {
    auto it = procs_.find(id);
    if (it == procs_.end() || it->second->exited) return;
    killpg(it->second->pid, signal);
  }

  bool CanTell() const override { return true; }

  Status Tell(RankId id, const std::string& line) override {
    auto it = procs_.find(id);
    if (it != procs_.end() && it->second->warm && !it->second->exited) {
      for (const auto& w : warm_)
        if (w->serving == id)
          return warm::Send(w->control.native_handle(), line + "\n", {}, /*nonblocking=*/true);
    }
    if (it == procs_.end() || it->second->exited || it->second->control < 0)
      return Status::NotFound("trial ", id.trial, " rank ", id.rank, " has no control socket");
    const std::string text = line + "\n";
    // One short line into an empty socket buffer: it goes whole or not at all.
    ssize_t n = send(it->second->control, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(text.size())) return Status::Ok();
    return Status::Io(
        "trial ", id.trial, " rank ", id.rank,
        ": cannot write to its control socket: ", n < 0 ? std::strerror(errno) : "short write");
  }

  void Shutdown() override {
    done_ = true;
    sigchld_.cancel();
    StopWarmTrainers();
  }

 private:
  // ---- Warm trainers ----
  // The attempt lock (SpawnRequest::lock_path), taken here without waiting and handed to the
  // warm trainer with the trial, which holds it until the trial ends: -1 where there is none or
  // the file system keeps no locks; an error while an earlier attempt holds it (the rank then
  // starts as its own process, which waits for it).
  static Result<int> TakeLockForWarm(const std::string& path) {
    if (path.empty()) return -1;
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    const int e = errno;
    close(fd);
    if (e == EWOULDBLOCK) return Status::FailedPrecondition("an earlier attempt holds ", path);
    return -1;
  }

  Status StartWarm(RankId id, const SpawnRequest& request) {
    const std::string message = warm::FormatRun({request.warm_argv, request.env, request.workdir});
    if (message.size() > warm::kMaxMessage)
      return Status::FailedPrecondition("the trial's request is too large for a warm trainer");
    HP_ASSIGN_OR_RETURN(const int lock, TakeLockForWarm(request.lock_path));
    const Status started = StartWarmLocked(id, request, message, lock);
    if (lock >= 0) close(lock);  // the trainer holds its own copy, or the trial never started
    return started;
  }

  Status StartWarmLocked(RankId id, const SpawnRequest& request, const std::string& message,
                         int lock) {
    const std::string key = WarmKey(request);
    std::shared_ptr<WarmTrainer> w;
    for (const auto& candidate : warm_)
      if (!candidate->exited && !candidate->serving && candidate->key == key) w = candidate;
    if (!w) {
      HP_ASSIGN_OR_RETURN(w, StartWarmTrainer(key, request));
    }
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return Status::Io("pipe: ", std::strerror(errno));
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      return Status::Io("pipe: ", std::strerror(errno));
    }
    std::vector<int> ends = {out[1], err[1]};
    if (lock >= 0) ends.push_back(lock);
    Status sent = warm::Send(w->control.native_handle(), message, ends, /*nonblocking=*/true);
    close(out[1]);
    close(err[1]);
    if (!sent.ok()) {
      close(out[0]);
      close(err[0]);
      killpg(w->pid, SIGKILL);  // a trainer that cannot be told is of no more use
      return sent;
    }
    auto p = std::make_shared<Proc>(io_);
    p->pid = w->pid;
    p->warm = true;
    p->out.assign(out[0]);
    p->err.assign(err[0]);
    procs_[id] = p;
    w->serving = id;
    if (cb_.on_started) cb_.on_started(id, p->pid);
    Read(id, p, false);
    Read(id, p, true);
    return Status::Ok();
  }

  Result<std::shared_ptr<WarmTrainer>> StartWarmTrainer(const std::string& key,
                                                        const SpawnRequest& request) {
    SpawnRequest serve;
    serve.command = StrCat("exec ", ShellQuoted(request.warm_argv.front()), " ", warm::kServeFlag);
    serve.workdir = request.workdir;
    serve.env = request.env;
    serve.control = true;
    serve.control_packets = true;
    HP_ASSIGN_OR_RETURN(Spawned spawned, SpawnFenced(serve));
    auto w = std::make_shared<WarmTrainer>(io_);
    w->pid = spawned.pid;
    w->key = key;
    w->control.assign(spawned.control_fd);
    w->out.assign(spawned.stdout_fd);
    w->err.assign(spawned.stderr_fd);
    warm_.push_back(w);
    Drop(w, w->out);
    Drop(w, w->err);
    AwaitEnd(w);
    return w;
  }

  void Drop(const std::shared_ptr<WarmTrainer>& w, asio::posix::stream_descriptor& stream) {
    // One buffer for both streams: what is read is dropped anyway.
    stream.async_read_some(asio::buffer(w->drop),
                           [this, w, &stream](boost::system::error_code ec, size_t) {
                             if (!ec) return Drop(w, stream);
                             boost::system::error_code ignored;
                             stream.close(ignored);
                           });
  }

  // The trainer's next message: how its trial ended. End of file: it is exiting (SIGCHLD says how).
  void AwaitEnd(const std::shared_ptr<WarmTrainer>& w) {
    w->control.async_wait(asio::posix::stream_descriptor::wait_read,
                          [this, w](boost::system::error_code ec) {
                            if (ec || w->exited) return;
                            std::vector<int> fds;
                            auto message = warm::Receive(w->control.native_handle(), &fds);
                            for (int fd : fds) close(fd);
                            if (!message.ok() || !message->has_value()) return;
                            if (auto end = warm::ParseEnd(**message); end && w->serving) {
                              const RankId id = *w->serving;
                              w->serving.reset();
                              if (auto it = procs_.find(id); it != procs_.end()) {
                                // A copy: MaybeReport erases the map's entry.
                                const std::shared_ptr<Proc> p = it->second;
                                p->exited = true;
                                p->status = WaitStatusOf(*end);
                                MaybeReport(id, p);
                              }
                            }
                            AwaitEnd(w);
                          });
  }

  // A warm trainer has exited: the trial it was serving ends with it, as its own process would.
  void WarmTrainerExited(const std::shared_ptr<WarmTrainer>& w, int status) {
    w->exited = true;
    killpg(w->pid, SIGKILL);
    UnfenceGroup(w->pid);
    boost::system::error_code ignored;
    w->control.close(ignored);
    if (w->serving) {
      const RankId id = *w->serving;
      w->serving.reset();
      if (auto it = procs_.find(id); it != procs_.end() && !it->second->exited) {
        const std::shared_ptr<Proc> p = it->second;  // MaybeReport erases the map's entry
        p->exited = true;
        p->status = status;
        MaybeReport(id, p);
      }
    }
    std::erase(warm_, w);
  }

  // Idle ones are killed, busy ones told (end of file) to exit after their trial.
  void StopWarmTrainers() {
    for (const auto& w : warm_) {
      boost::system::error_code ignored;
      w->control.close(ignored);
      if (!w->serving && !w->exited) {
        killpg(w->pid, SIGKILL);
        // Reaped now: nothing will wait for SIGCHLD any more. SIGKILL makes this prompt.
        int status;
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {
        }
        UnfenceGroup(w->pid);
        w->exited = true;
      }
    }
  }

  void Wait() {
    sigchld_.async_wait([this](boost::system::error_code ec, int) {
      if (ec || done_) return;
      Reap();
      Wait();
    });
  }

  void Reap() {
    // One SIGCHLD may stand for several exits; ask about every process.
    std::vector<std::pair<RankId, std::shared_ptr<Proc>>> ended;
    std::vector<std::pair<std::shared_ptr<WarmTrainer>, int>> warm_ended;
    for (const auto& w : warm_) {
      int status = 0;
      if (!w->exited && waitpid(w->pid, &status, WNOHANG) == w->pid)
        warm_ended.emplace_back(w, status);
    }
    for (auto& [w, status] : warm_ended) WarmTrainerExited(w, status);
    for (auto& [id, p] : procs_) {
      if (p->exited || p->warm) continue;
      int status = 0;
      if (waitpid(p->pid, &status, WNOHANG) != p->pid) continue;
      p->exited = true;
      p->status = status;
      p->CloseControl();
      // Whatever the rank left behind in its group dies with it, and so the pipes close.
      killpg(p->pid, SIGKILL);
      UnfenceGroup(p->pid);
      ended.emplace_back(id, p);
    }
    for (auto& [id, p] : ended) {
      p->drain.expires_after(kDrainAfterExit);
      p->drain.async_wait([p = p](boost::system::error_code ec) {
        if (ec) return;
        boost::system::error_code ignored;
        p->out.close(ignored);
        p->err.close(ignored);
      });
      MaybeReport(id, p);
    }
  }

  void Read(RankId id, const std::shared_ptr<Proc>& p, bool is_err) {
    auto& stream = is_err ? p->err : p->out;
    auto& buf = is_err ? p->err_buf : p->out_buf;
    stream.async_read_some(asio::buffer(buf),
                           [this, id, p, is_err](boost::system::error_code ec, size_t n) {
                             if (p->reported) return;
                             PartialLine& line = is_err ? p->err_line : p->out_line;
                             const auto& buf = is_err ? p->err_buf : p->out_buf;
                             for (size_t i = 0; i < n; ++i) {
                               if (buf[i] == '\n') {
                                 cb_.on_line(id, is_err, line.Take());
                               } else {
                                 line.Add(buf[i]);
                               }
                             }
                             if (ec) {
                               if (!line.empty()) cb_.on_line(id, is_err, line.Take());
                               (is_err ? p->err_open : p->out_open) = false;
                               boost::system::error_code ignored;
                               (is_err ? p->err : p->out).close(ignored);
                               MaybeReport(id, p);
                               return;
                             }
                             Read(id, p, is_err);
                           });
  }

  // A process whose group the fence knows before its command runs: nothing of it escapes a lease
  // that runs out meanwhile (the agent stopped just after the fork).
  Result<Spawned> SpawnFenced(const SpawnRequest& request) {
    pid_t fenced = -1;
    auto spawned = Spawn(request, [&](pid_t group) { FenceGroup(fenced = group); });
    if (!spawned.ok() && fenced > 0) UnfenceGroup(fenced);  // reaped already: it could not run
    return spawned;
  }

  // A process group this executor started, killed should this process die first; and one that
  // has been killed and reaped.
  void FenceGroup(pid_t group) {
    if (fence_) fence_->Add(group);
  }
  void UnfenceGroup(pid_t group) {
    if (fence_) fence_->Remove(group);
  }

  void MaybeReport(RankId id, const std::shared_ptr<Proc>& p) {
    if (p->reported || !p->exited || p->out_open || p->err_open) return;
    p->reported = true;
    p->drain.cancel();
    procs_.erase(id);
    cb_.on_exit(id, RankExitFromWaitStatus(p->status));
  }

  asio::io_context& io_;
  Callbacks cb_;
  asio::signal_set sigchld_;
  std::map<RankId, std::shared_ptr<Proc>> procs_;
  std::vector<std::shared_ptr<WarmTrainer>> warm_;
  bool done_ = false;
  Fence* fence_;  // null: none could be started
  // Last, so that it goes last: what is still running when the executor goes is killed.
  std::unique_ptr<Fence> own_fence_;
};

}  // namespace

GangStarted Executor::StartGang(const GangRequest& gang) {
  GangStarted result;
  for (const GangRequest::Rank& rank : gang.ranks) {
    result.status = Start({gang.trial, result.started}, rank.node, rank.request);
    if (!result.status.ok()) break;
    ++result.started;
  }
  return result;
}

std::unique_ptr<Executor> MakeLocalExecutor(asio::io_context& io, Executor::Callbacks cb,
                                            Fence* fence) {
  return std::make_unique<LocalExecutor>(io, std::move(cb), fence);
}

}  // namespace hyperpack::scheduler
