// hyperpack serve: agents register their nodes, clients submit studies, and each study runs
// through the same driver and controller as `hyperpack run`, its ranks on the agents' nodes.
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>

#include "hyperpack/host.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/study/spec.h"
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

class Server;

// Ranks started through the agents' connections.
class AgentExecutor : public Executor {
 public:
  explicit AgentExecutor(Server* server) : server_(server) {}
  void SetCallbacks(Callbacks cb) override { cb_ = std::move(cb); }
  Status Start(RankId id, int node, const SpawnRequest& request) override;
  void Signal(RankId id, int signal) override;
  void Shutdown() override {}

  void Line(RankId id, bool is_err, const std::string& text) {
    if (where_.count(id) && cb_.on_line) cb_.on_line(id, is_err, text);
  }
  void Exit(RankId id, RankExit exit) {
    if (where_.erase(id) && cb_.on_exit) cb_.on_exit(id, exit);
  }
  // Every rank that was running on `node` ends as lost.
  void NodeLost(int node) {
    std::vector<RankId> lost;
    for (const auto& [id, n] : where_)
      if (n == node) lost.push_back(id);
    for (const RankId& id : lost) Exit(id, RankExit::Lost());
  }
  void Forget() { where_.clear(); }

 private:
  Server* server_;
  Callbacks cb_;
  std::map<RankId, int> where_;
};

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : options_(o),
        log_(o.log ? *o.log : std::cout),
        acceptor_(io_),
        signals_(io_, SIGINT, SIGTERM),
        watchdog_(io_),
        executor_(this) {}

  Status Run() {
    HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io_, options_.listen));
    boost::system::error_code ec;
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::Io("cannot listen on ", options_.listen, ": ", ec.message());
    auto local = acceptor_.local_endpoint();
    Log("listening on ", local.address().to_string(), ":", local.port());
    signals_.async_wait([this](boost::system::error_code e, int) {
      if (!e) Stop();
    });
    asio::co_spawn(io_, Accept(), asio::detached);
    Watch();
    io_.run();
    return Status::Ok();
  }

  // Called by the executor.
  Status Launch(RankId id, int node, const SpawnRequest& r) {
    auto it = links_.find(node);
    if (it == links_.end() || it->second.lost)
      return Status::FailedPrecondition("the agent of node ", node, " is gone");
    it->second.conn->Send(protocol::Launch{id, r.command, r.workdir, r.env}.ToJson());
    return Status::Ok();
  }
  void Kill(RankId id, int node, int signal) {
    auto it = links_.find(node);
    if (it == links_.end() || it->second.lost) return;
    it->second.conn->Send(protocol::Kill{id, signal}.ToJson());
  }

 private:
  struct Link {
    std::shared_ptr<Connection> conn;
    std::string name;
    Clock::time_point last_seen;
    bool lost = false;
  };
  struct Submission {
    study::StudySpec spec;
    std::shared_ptr<Connection> client;
    std::optional<int> max_trials, max_parallel;
  };

  template <typename... Args>
  void Log(const Args&... args) {
    log_ << "[" << FormatTimestamp(WallNow()) << "] " << StrCat(args...) << std::endl;
  }

  asio::awaitable<void> Accept() {
    while (acceptor_.is_open()) {
      boost::system::error_code ec;
      tcp::socket socket =
          co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (!acceptor_.is_open()) co_return;
        continue;
      }
      auto c = std::make_shared<Connection>(std::move(socket));
      asio::co_spawn(io_, Session(c), asio::detached);
    }
  }

  asio::awaitable<void> Session(std::shared_ptr<Connection> c) {
    protocol::Role role;
    try {
      role = co_await protocol::ServerHandshake(*c, options_.token);
    } catch (const std::exception& e) {
      Log("rejected ", c->peer(), ": ", e.what());
      c->Close();
      co_return;
    }
    int node = -1;
    try {
      switch (role) {
        case protocol::Role::kAgent:
          co_await AgentSession(c, &node);
          break;
        case protocol::Role::kClient:
          co_await ClientSession(c);
          break;
      }
    } catch (const std::exception& e) {
      if (node >= 0) {
        NodeLost(node, e.what());
      } else {
        Log("closed ", c->peer(), ": ", e.what());
      }
    }
    c->Close();
  }

  asio::awaitable<void> AgentSession(std::shared_ptr<Connection> c, int* node) {
    const Json first = co_await c->Receive();
    if (protocol::TypeOf(first) != FrameType::kRegister)
      throw ProtocolError("an agent must register first");
    *node = Join(c, protocol::Register::FromJson(first));
    while (true) {
      const Json m = co_await c->Receive();
      links_[*node].last_seen = Clock::now();
      FromAgent(m);
    }
  }

  // A registered agent's node joins the cluster (and the running study); returns its index.
  int Join(const std::shared_ptr<Connection>& c, const protocol::Register& reg) {
    ClusterNode n;
    n.node.name = reg.name;
    n.gpu_names = reg.gpus;
    n.node.gpus = static_cast<int>(n.gpu_names.size());
    n.node.cpus = reg.cpus;
    n.address = reg.address;
    if (n.address.empty()) n.address = c->peer().substr(0, c->peer().rfind(':'));
    if (n.node.gpus > 64 || n.node.cpus < 0) throw ProtocolError("impossible node description");
    const int node = static_cast<int>(nodes_.size());
    nodes_.push_back(n);
    links_[node] = {c, n.node.name, Clock::now(), false};
    Log("agent ", n.node.name, " joined from ", c->peer(), ": ", n.node.gpus, " GPUs, ",
        n.node.cpus, " CPU slots");
    if (run_) run_->AddNode(n);
    return node;
  }

  // A frame from a registered agent.
  void FromAgent(const Json& m) {
    switch (const FrameType type = protocol::TypeOf(m)) {
      case FrameType::kHeartbeat:
        return;
      case FrameType::kLine: {
        const protocol::Line line = protocol::Line::FromJson(m);
        executor_.Line(line.id, line.stream == protocol::Stream::kErr, line.text);
        return;
      }
      case FrameType::kExit: {
        const protocol::Exit exit = protocol::Exit::FromJson(m);
        executor_.Exit(exit.id, exit.exit);
        return;
      }
      default:
        throw ProtocolError(std::string("unexpected '") + protocol::FrameTypeName(type) +
                            "' frame from an agent");
    }
  }

  void NodeLost(int node, const std::string& why) {
    Link& l = links_[node];
    if (l.lost) return;
    l.lost = true;
    l.conn->Close();
    nodes_[node].node.gpus = 0;
    nodes_[node].node.cpus = 0;
    Log("agent ", l.name, " lost: ", why);
    if (run_) {
      run_->RemoveNode(node);
      executor_.NodeLost(node);
    }
  }

  void Watch() {
    watchdog_.expires_after(std::chrono::milliseconds(250));
    watchdog_.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      auto limit = std::chrono::duration<double>(options_.heartbeat_timeout_s);
      for (auto& [node, l] : links_)
        if (!l.lost && Clock::now() - l.last_seen > limit)
          NodeLost(node, StrCat("silent for ", FormatDuration(options_.heartbeat_timeout_s)));
      Watch();
    });
  }

  asio::awaitable<void> ClientSession(std::shared_ptr<Connection> c) {
    const Json m = co_await c->Receive();
    if (protocol::TypeOf(m) != FrameType::kSubmit)
      throw ProtocolError("a client must submit a study");
    const protocol::Submit submit = protocol::Submit::FromJson(m);
    study::ParseOutcome parsed = study::ParseStudy(submit.study_text, submit.study_path);
    if (!parsed.spec) {
      c->Send(protocol::Done{2, parsed.ErrorText()}.ToJson());
      co_return;
    }
    Submission s{*parsed.spec, c, submit.max_trials, submit.max_parallel};
    Log("study ", s.spec.name, " submitted by ", c->peer());
    if (run_ || !queue_.empty())
      c->Send(
          protocol::Progress{StrCat("queued behind ", queue_.size() + (run_ ? 1 : 0), " studies")}
              .ToJson());
    queue_.push_back(std::move(s));
    StartNext();
    // The client follows until its study is done; if it goes away, its study stops.
    try {
      while (true) co_await c->Receive();
    } catch (const ProtocolError&) {
    }
    if (run_ && current_client_ == c) {
      Log("client of study ", current_name_, " went away: stopping it");
      run_->Interrupt();
    }
  }

  void StartNext() {
    if (run_ || queue_.empty() || stopping_) return;
    Submission s = std::move(queue_.front());
    queue_.pop_front();
    RunOptions ro;
    ro.storage_path = options_.storage_path;
    ro.log_dir = options_.log_dir;
    ro.max_trials = s.max_trials;
    ro.max_parallel = s.max_parallel;
    ro.handle_signals = false;
    std::weak_ptr<Connection> weak = s.client;
    ro.on_progress = [weak](const std::string& line) {
      if (auto c = weak.lock()) c->Send(protocol::Progress{line}.ToJson());
    };
    current_client_ = s.client;
    current_name_ = s.spec.name;
    run_ = MakeStudyRun(s.spec, ro, io_, pool_, nodes_, &executor_);
    Status begun = run_->Begin([this, weak](Result<RunSummary> r) {
      // A study that could not start for what it asked (a different space, a live runner) is bad
      // input (2); one that failed in storage, 1.
      int code = r.ok() ? r->exit_code : r.status().code() == StatusCode::kIo ? 1 : 2;
      Log("study ", current_name_, " done (exit ", code, ")");
      if (auto c = weak.lock())
        c->Send(protocol::Done{code, r.ok() ? std::string() : r.status().message()}.ToJson());
      asio::post(io_, [this] { Finished(); });
    });
    if (!begun.ok()) {
      if (auto c = weak.lock()) c->Send(protocol::Done{2, begun.message()}.ToJson());
      Finished();
    }
  }

  void Finished() {
    run_.reset();
    executor_.Forget();
    current_client_.reset();
    if (stopping_) {
      io_.stop();
      return;
    }
    StartNext();
  }

  void Stop() {
    stopping_ = true;
    Log("stopping");
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    queue_.clear();
    if (run_) {
      run_->Interrupt();  // Finished() stops the io_context when the run is over
    } else {
      io_.stop();
    }
  }

  ServeOptions options_;
  std::ostream& log_;
  asio::io_context io_;
  // A study's start and end (SQLite, joins) and its tuner run here, never on the io thread.
  asio::thread_pool pool_{2};
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer watchdog_;
  AgentExecutor executor_;
  std::vector<ClusterNode> nodes_;  // every node that ever joined; lost ones hold nothing
  std::map<int, Link> links_;
  std::deque<Submission> queue_;
  std::unique_ptr<StudyRun> run_;
  std::shared_ptr<Connection> current_client_;
  std::string current_name_;
  bool stopping_ = false;
};

Status AgentExecutor::Start(RankId id, int node, const SpawnRequest& request) {
  HP_RETURN_IF_ERROR(server_->Launch(id, node, request));
  where_[id] = node;
  return Status::Ok();
}

void AgentExecutor::Signal(RankId id, int signal) {
  auto it = where_.find(id);
  if (it != where_.end()) server_->Kill(id, it->second, signal);
}

}  // namespace

std::string protocol_ReadToken(const std::string& path, std::string* error) {
  return protocol::ReadTokenFile(path, error);
}

Status Serve(const ServeOptions& options) {
  if (options.token.empty()) return Status::Invalid("a token is required (--token-file)");
  try {
    return Server(options).Run();
  } catch (const std::exception& e) {
    return Status::Io("server: ", e.what());
  }
}

}  // namespace hyperpack::scheduler
