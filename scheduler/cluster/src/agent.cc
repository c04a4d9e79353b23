// hyperpack agent: runs the ranks its server launches on this machine and streams their output.
// It outlives its server: when the connection goes, it reconnects with backoff and jitter and
// registers again with what it still runs; its fence stops those ranks once the server has not
// been heard from for the lease (see fence.h), so that an attempt the server has given up on
// never runs beside its re-run.
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/fence.h"
#include "hyperpack/scheduler/local_node.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/text.h"
#include "net.h"
#include "protocol.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::FrameType;
using protocol::Json;
using protocol::RankRef;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class Agent {
 public:
  explicit Agent(const AgentOptions& o)
      : options_(o),
        log_(o.log ? *o.log : std::cout),
        signals_(io_, SIGINT, SIGTERM),
        beat_(io_),
        retry_(io_),
        jitter_(std::random_device{}()) {
    node_ = o.fake_gpus >= 0 ? FakeGpuNode(o.fake_gpus, o.fake_gpu_memory_mb) : DetectLocalNode();
    if (!o.name.empty()) node_.name = o.name;
    // Until a server says its heartbeat timeout: three heartbeats.
    lease_s_ = 3 * options_.heartbeat_s;
  }

  Status Run() {
    HP_ASSIGN_OR_RETURN(servers_, ResolveAll(io_, options_.connect));
    HP_ASSIGN_OR_RETURN(tls_, tls::TlsContext::Make(options_.credentials, tls::End::kClient));
    HP_ASSIGN_OR_RETURN(fence_, Fence::Start());
    // The executor tells the fence of every process group it starts and reaps.
    executor_ = MakeLocalExecutor(
        io_,
        {[this](RankId id, bool is_err, const std::string& text) { OnLine(id, is_err, text); },
         [this](RankId id, RankExit exit) { OnExit(id, exit); }, nullptr, nullptr},
        fence_.get());
    signals_.async_wait([this](boost::system::error_code e, int) {
      if (!e) Shutdown("stopped");
    });
    asio::co_spawn(io_, Main(), asio::detached);
    Beat();
    io_.run();
    return refused_;
  }

 private:
  // A rank this agent runs: the server's name for it.
  struct Running {
    RankRef ref;
  };

  template <typename... Args>
  void Log(const Args&... args) {
    log_ << "[" << FormatTimestamp(WallNow()) << "] " << StrCat(args...) << std::endl;
  }

  // Connects, serves the connection until it ends, and tries again after a while, until stopped.
  asio::awaitable<void> Main() {
    double delay = kFirstRetryS;
    int failures = 0;
    while (!stopping_) {
      bool served = false;
      Status ended;
      try {
        ended = co_await Connect();
        served = ended.ok();
        while (ended.ok()) ended = co_await ServeOnce();
      } catch (const std::exception& e) {  // the connect's system errors
        ended = Status::Unavailable(protocol::ErrorText(e));
      }
      if (stopping_) co_return;
      if (served) {
        Log("lost the server ", Server(), ": ", ended.message(), "; reconnecting");
      } else if (failures++ % 10 == 0) {
        Log("cannot reach the server ", Server(), ": ", ended.message(), "; retrying");
      }
      // The next address: a standby that took over (one at a time: the others do not listen).
      next_ = (next_ + 1) % servers_.size();
      if (conn_) conn_->Close();
      conn_.reset();
      sent_.clear();
      if (!refused_.ok()) {
        Log("the server ", Server(), " refused this agent: ", refused_.message());
        Shutdown("refused");
        co_return;
      }
      if (served) delay = kFirstRetryS, failures = 0;
      // Jitter: agents that lost the same server do not all come back in the same instant.
      const double wait = delay * std::uniform_real_distribution<double>(0.5, 1.5)(jitter_);
      delay = std::min(delay * 2, kMaxRetryS);
      retry_.expires_after(Seconds(wait));
      boost::system::error_code ec;
      co_await retry_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  // The next frame from the server, handled; an error ends the connection.
  asio::awaitable<Status> ServeOnce() {
    Result<Json> m = co_await conn_->Receive();
    if (!m.ok()) co_return m.status();
    co_return FromServer(*m);
  }

  // Connects and registers; throws only the connect's system errors.
  asio::awaitable<Status> Connect() {
    tcp::socket socket(io_);
    co_await socket.async_connect(servers_[next_].endpoint, asio::use_awaitable);
    conn_ = std::make_shared<Connection>(std::move(socket));
    Result<protocol::Welcome> welcomed = co_await protocol::ClientHandshake(
        *conn_, *tls_, servers_[next_].host, options_.credentials.token, protocol::Role::kAgent);
    if (!welcomed.ok()) {
      // Refused before any welcome (a wrong token, certificate or version): trying again will not
      // mend it. A server that is restarting, loaded or gone is tried again (GivesUp...'s rules).
      const StatusCode code = welcomed.status().code();
      closed_in_a_row_ = code == StatusCode::kUnavailable ? closed_in_a_row_ + 1 : 0;
      if (!welcomed_once_ && protocol::GivesUpBeforeAnyWelcome(code, closed_in_a_row_))
        refused_ = Status::Invalid(welcomed.status().message(),
                                   code == StatusCode::kUnavailable
                                       ? StrCat(" (", closed_in_a_row_, " times in a row)")
                                       : "");
      co_return welcomed.status();
    }
    const protocol::Welcome& welcome = *welcomed;
    welcomed_once_ = true;
    closed_in_a_row_ = 0;
    // The fence stops the ranks before the server would declare this node lost: a margin of two
    // heartbeats for the last one's travel and the server's check.
    if (welcome.heartbeat_timeout_s > 0) {
      lease_s_ =
          std::max(options_.heartbeat_s, welcome.heartbeat_timeout_s - 2 * options_.heartbeat_s);
      if (welcome.heartbeat_timeout_s < 3 * options_.heartbeat_s && !warned_lease_) {
        warned_lease_ = true;
        Log("warning: the server's heartbeat timeout (",
            FormatDuration(welcome.heartbeat_timeout_s), ") is under three heartbeats (",
            FormatDuration(options_.heartbeat_s),
            " each): a trial of a silent agent could run again before this one stops it; use a "
            "shorter --heartbeat");
      }
    }
    protocol::Register reg{node_.name, node_.gpus,         node_.cpus, conn_->local_address(),
                           {},         node_.gpu_memory_mb};
    for (const auto& [id, r] : running_) reg.running.push_back(r.ref);
    // The server counts this node as heard from when the register arrives, after this.
    const Clock::time_point sent = Clock::now();
    conn_->Send(reg.ToJson());
    Heard(sent);
    Log("connected to ", Server(), " as ", node_.name, ": ", node_.gpus.size(), " GPUs, ",
        node_.cpus, " CPU slots",
        running_.empty() ? "" : StrCat("; still running ", running_.size(), " ranks"));
    co_return Status::Ok();
  }

  // The server heard this agent at or after `at` (when the frame it answered was sent): the lease
  // runs from then. Measured from the send, not from when the answer is read, the fence stops the
  // ranks before the server, counting from the arrival, can declare this node lost, however late
  // this process reads (a loaded machine, a SIGSTOP).
  void Heard(Clock::time_point at) {
    deadline_ = std::max(deadline_, at + Seconds(lease_s_));
    fence_->RenewUntil(deadline_);
  }

  // A frame from the server after registration; an error ends the connection.
  Status FromServer(const Json& m) {
    HP_ASSIGN_OR_RETURN(const FrameType type, protocol::TypeOf(m));
    switch (type) {
      case FrameType::kHeartbeat: {
        // The answer to heartbeat `seq`; those before it went unanswered only if lost, and
        // answers come in order.
        HP_ASSIGN_OR_RETURN(const protocol::Heartbeat beat, protocol::Heartbeat::FromJson(m));
        const int64_t seq = beat.seq;
        while (!sent_.empty() && sent_.front().first < seq) sent_.pop_front();
        if (!sent_.empty() && sent_.front().first == seq) {
          Heard(sent_.front().second);
          sent_.pop_front();
        }
        return Status::Ok();
      }
      case FrameType::kLaunch: {
        HP_ASSIGN_OR_RETURN(const protocol::Launch launch, protocol::Launch::FromJson(m));
        Start(launch);
        return Status::Ok();
      }
      case FrameType::kKill: {
        HP_ASSIGN_OR_RETURN(const protocol::Kill kill, protocol::Kill::FromJson(m));
        for (const auto& [id, r] : running_)
          if (r.ref == kill.ref) executor_->Signal(id, kill.signal);
        return Status::Ok();
      }
      default:
        return Status::Invalid("unexpected '", protocol::FrameTypeName(type),
                               "' frame from the server");
    }
  }

  // Starts a launched rank; one that cannot start is reported as its error line and a
  // never_started exit, which the server handles as any other end.
  void Start(const protocol::Launch& launch) {
    SpawnRequest r;
    r.command = launch.command;
    r.workdir = launch.workdir;
    r.env = launch.env;
    r.warm_argv = launch.warm_argv;
    r.lock_path = launch.lock;
    r.env.push_back(std::string(env::kAgent) + "=" + node_.name);
    Status s = MakeCheckpointDir(r.env);
    const RankId local{next_local_++, 0};
    if (s.ok()) s = executor_->Start(local, 0, r);
    if (s.ok()) {
      running_[local] = {launch.ref};
      return;
    }
    Send(protocol::Line{launch.ref, protocol::Stream::kErr, s.message()}.ToJson());
    Send(protocol::Exit{launch.ref, RankExit::NeverStarted()}.ToJson());
  }

  // The trial's checkpoint folder exists before its command starts.
  static Status MakeCheckpointDir(const std::vector<std::string>& env) {
    const std::string prefix = std::string(env::kCheckpointDir) + "=";
    for (const std::string& kv : env) {
      if (kv.rfind(prefix, 0) != 0 || kv.size() == prefix.size()) continue;
      std::error_code ec;
      std::filesystem::create_directories(kv.substr(prefix.size()), ec);
      if (ec)
        return Status::Io("cannot create the checkpoint folder ", kv.substr(prefix.size()), ": ",
                          ec.message());
    }
    return Status::Ok();
  }

  void OnLine(RankId id, bool is_err, const std::string& text) {
    auto it = running_.find(id);
    if (it == running_.end()) return;
    const auto stream = is_err ? protocol::Stream::kErr : protocol::Stream::kOut;
    Send(protocol::Line{it->second.ref, stream, text}.ToJson());
  }

  void OnExit(RankId id, RankExit exit) {
    auto it = running_.find(id);
    if (it == running_.end()) return;
    Send(protocol::Exit{it->second.ref, exit}.ToJson());
    running_.erase(it);
  }

  // Output and exits while no server listens are dropped: the server has declared those attempts
  // lost by the time it hears from this agent again.
  void Send(const Json& frame) {
    if (conn_ && conn_->open()) conn_->Send(frame);
  }

  // Heartbeats, and the agent's own fence: a server silent for the lease gets its ranks stopped
  // here too (the keeper does the same should this process be unable to).
  void Beat() {
    beat_.expires_after(Seconds(options_.heartbeat_s));
    beat_.async_wait([this](boost::system::error_code ec) {
      if (ec || stopping_) return;
      if (conn_ && conn_->open()) {
        sent_.emplace_back(++seq_, Clock::now());
        if (sent_.size() > 1000) sent_.pop_front();  // a server that never answers
        conn_->Send(protocol::Heartbeat{seq_}.ToJson());
      }
      if (!running_.empty() && Clock::now() > deadline_) {
        Log("the server has not answered for the lease (", FormatDuration(lease_s_), "): stopping ",
            running_.size(), " ranks (it runs their trials elsewhere)");
        for (const auto& [id, r] : running_) executor_->Signal(id, SIGKILL);
        if (conn_) conn_->Close();
      }
      Beat();
    });
  }

  void Shutdown(const std::string& why) {
    Log("agent ", node_.name, " stopping: ", why);
    stopping_ = true;
    // The ranks cannot report anywhere now; they go with the agent.
    for (const auto& [id, r] : running_) executor_->Signal(id, SIGKILL);
    executor_->Shutdown();
    beat_.cancel();
    retry_.cancel();
    signals_.cancel();
    if (conn_) conn_->Close();
    io_.stop();
  }

  AgentOptions options_;
  std::ostream& log_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::steady_timer beat_;
  asio::steady_timer retry_;
  std::mt19937_64 jitter_;
  std::vector<ServerAddress> servers_;  // --connect's, in order
  size_t next_ = 0;                     // the one to connect to next
  const std::string& Server() const { return servers_[next_].text; }
  LocalNode node_;
  std::unique_ptr<Fence> fence_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<Connection> conn_;
  std::map<RankId, Running> running_;  // by the executor's id for it
  int next_local_ = 0;
  double lease_s_ = 15;
  Clock::time_point deadline_ = Clock::now();  // the fence's: ranks die then unless renewed
  std::deque<std::pair<int64_t, Clock::time_point>> sent_;  // heartbeats not answered yet
  int64_t seq_ = 0;
  bool stopping_ = false;
  bool welcomed_once_ = false;
  int closed_in_a_row_ = 0;  // handshakes ended by a closed connection since the last other end
  bool warned_lease_ = false;
  Status refused_;
  std::shared_ptr<tls::TlsContext> tls_;  // every connection's, made in Run
};

}  // namespace

Status RunAgent(const AgentOptions& options) {
  if (options.credentials.token.empty())
    return Status::Invalid("a token is required (--token-file)");
  try {
    return Agent(options).Run();
  } catch (const std::exception& e) {
    return Status::Io("agent: ", e.what());
  }
}

}  // namespace hyperpack::scheduler
