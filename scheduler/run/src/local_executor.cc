#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "hyperpack/scheduler/executor.h"

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
  pid_t pid = -1;
  int control = -1;  // the runner's end of the rank's control socket
  asio::posix::stream_descriptor out, err;
  std::array<char, 8192> out_buf{}, err_buf{};
  PartialLine out_line, err_line;
  bool exited = false, reported = false;
  int status = 0;
  bool out_open = true, err_open = true;
  asio::steady_timer drain;
};

class LocalExecutor : public Executor {
 public:
  LocalExecutor(asio::io_context& io, Callbacks cb)
      : io_(io), cb_(std::move(cb)), sigchld_(io, SIGCHLD) {
    Wait();
  }

  void SetCallbacks(Callbacks cb) override { cb_ = std::move(cb); }

  Status Start(RankId id, int, const SpawnRequest& request) override {
    auto spawned = Spawn(request);
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
  }

 private:
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
    for (auto& [id, p] : procs_) {
      if (p->exited) continue;
      int status = 0;
      if (waitpid(p->pid, &status, WNOHANG) != p->pid) continue;
      p->exited = true;
      p->status = status;
      p->CloseControl();
      // Whatever the rank left behind in its group dies with it, and so the pipes close.
      killpg(p->pid, SIGKILL);
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

  void MaybeReport(RankId id, const std::shared_ptr<Proc>& p) {
    if (p->reported || !p->exited || p->out_open || p->err_open) return;
    p->reported = true;
    p->drain.cancel();
    procs_.erase(id);
    cb_.on_exit(id, RankExit::FromWaitStatus(p->status));
  }

  asio::io_context& io_;
  Callbacks cb_;
  asio::signal_set sigchld_;
  std::map<RankId, std::shared_ptr<Proc>> procs_;
  bool done_ = false;
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

std::unique_ptr<Executor> MakeLocalExecutor(asio::io_context& io, Executor::Callbacks cb) {
  return std::make_unique<LocalExecutor>(io, std::move(cb));
}

}  // namespace hyperpack::scheduler
