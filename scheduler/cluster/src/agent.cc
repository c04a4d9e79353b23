// hyperpack agent: runs the ranks its server launches on this machine and streams their output.
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <iostream>
#include <set>

#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/executor.h"
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
using protocol::ProtocolError;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class Agent {
 public:
  explicit Agent(const AgentOptions& o)
      : options_(o), log_(o.log ? *o.log : std::cout), signals_(io_, SIGINT, SIGTERM), beat_(io_) {
    node_ = o.fake_gpus >= 0 ? FakeGpuNode(o.fake_gpus) : DetectLocalNode();
    if (!o.name.empty()) node_.name = o.name;
    executor_ = MakeLocalExecutor(io_, {[this](RankId id, bool is_err, const std::string& text) {
                                          if (!conn_) return;
                                          const auto stream = is_err ? protocol::Stream::kErr
                                                                     : protocol::Stream::kOut;
                                          conn_->Send(protocol::Line{id, stream, text}.ToJson());
                                        },
                                        [this](RankId id, RankExit exit) {
                                          running_.erase(id);
                                          if (conn_) conn_->Send(protocol::Exit{id, exit}.ToJson());
                                        }});
  }

  Status Run() {
    HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io_, options_.connect));
    tcp::socket socket(io_);
    boost::system::error_code ec;
    socket.connect(ep, ec);
    if (ec) return Status::Io("cannot connect to ", options_.connect, ": ", ec.message());
    conn_ = std::make_shared<Connection>(std::move(socket));
    signals_.async_wait([this](boost::system::error_code e, int) {
      if (e) return;
      stopped_by_signal_ = true;
      Shutdown("stopped");
    });
    asio::co_spawn(io_, Main(), asio::detached);
    io_.run();
    return result_;
  }

 private:
  template <typename... Args>
  void Log(const Args&... args) {
    log_ << "[" << FormatTimestamp(WallNow()) << "] " << StrCat(args...) << std::endl;
  }

  asio::awaitable<void> Main() {
    try {
      co_await protocol::ClientHandshake(*conn_, options_.token, protocol::Role::kAgent);
      conn_->Send(
          protocol::Register{node_.name, node_.gpus, node_.cpus, conn_->local_address()}.ToJson());
      Log("connected to ", options_.connect, " as ", node_.name, ": ", node_.gpus.size(), " GPUs, ",
          node_.cpus, " CPU slots");
      Beat();
      while (true) FromServer(co_await conn_->Receive());
    } catch (const std::exception& e) {
      if (!stopped_by_signal_) {
        result_ = Status::Io("lost the server ", options_.connect, ": ", e.what());
        Shutdown(e.what());
      }
    }
  }

  // A frame from the server after registration.
  void FromServer(const Json& m) {
    switch (const FrameType type = protocol::TypeOf(m)) {
      case FrameType::kLaunch:
        Start(protocol::Launch::FromJson(m));
        return;
      case FrameType::kKill: {
        const protocol::Kill kill = protocol::Kill::FromJson(m);
        executor_->Signal(kill.id, kill.signal);
        return;
      }
      default:
        throw ProtocolError(std::string("unexpected '") + protocol::FrameTypeName(type) +
                            "' frame from the server");
    }
  }

  // Starts a launched rank; one that cannot start is reported as its error line and a
  // never_started exit, which the server handles as any other end.
  void Start(const protocol::Launch& launch) {
    SpawnRequest r{launch.command, launch.workdir, launch.env};
    r.env.push_back(std::string(env::kAgent) + "=" + node_.name);
    Status s = executor_->Start(launch.id, 0, r);
    if (s.ok()) {
      running_.insert(launch.id);
      return;
    }
    conn_->Send(protocol::Line{launch.id, protocol::Stream::kErr, s.message()}.ToJson());
    conn_->Send(protocol::Exit{launch.id, RankExit::NeverStarted()}.ToJson());
  }

  void Beat() {
    beat_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options_.heartbeat_s)));
    beat_.async_wait([this](boost::system::error_code ec) {
      if (ec || !conn_ || !conn_->open()) return;
      conn_->Send(protocol::Heartbeat{}.ToJson());
      Beat();
    });
  }

  void Shutdown(const std::string& why) {
    Log("agent ", node_.name, " stopping: ", why);
    // The ranks cannot report anywhere now; they go with the agent.
    for (const RankId& id : running_) executor_->Signal(id, SIGKILL);
    executor_->Shutdown();
    beat_.cancel();
    signals_.cancel();
    if (conn_) conn_->Close();
    io_.stop();
  }

  AgentOptions options_;
  std::ostream& log_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::steady_timer beat_;
  LocalNode node_;
  std::unique_ptr<Executor> executor_;
  std::shared_ptr<Connection> conn_;
  std::set<RankId> running_;
  Status result_;
  bool stopped_by_signal_ = false;
};

}  // namespace

Status RunAgent(const AgentOptions& options) {
  if (options.token.empty()) return Status::Invalid("a token is required (--token-file)");
  try {
    return Agent(options).Run();
  } catch (const std::exception& e) {
    return Status::Io("agent: ", e.what());
  }
}

}  // namespace hyperpack::scheduler
