// hyperpack serve: agents register their nodes, clients submit studies, and each study runs
// through the same driver and controller as `hyperpack run`, its ranks on the agents' nodes. All
// submitted studies run at once, each on its fair share of the nodes (Arbitrate, fair_share.h).
//
// What survives what:
//  - bytes: every frame is decoded through its struct, and any exception from a connection's
//    handling closes that connection only (logged); the rest keep being served;
//  - agents that go: an agent silent for the heartbeat timeout, or whose connection drops, is lost
//    and its trials are requeued; its frames about them are ignored from then on (every launch
//    names its run, trial and attempt), and a rank it still reports when it comes back is killed;
//  - the server itself: submissions are kept in storage; started again, the server waits one
//    heartbeat timeout (so that the agents' fences have stopped what the old server launched, or
//    the agents have come back and been told to kill it), then resumes every study it was running
//    (their trials requeued from their checkpoints); clients reconnect and follow their
//    submission by its id.
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "hyperpack/host.h"
#include "hyperpack/net/accept.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "net.h"
#include "protocol.h"
#include "server_impl.h"
#include "server_metrics.h"

namespace hyperpack::scheduler {
namespace serve {

// How often a standby asks for the leader lease: a takeover comes within this of the lease's end.
constexpr std::chrono::milliseconds kStandbyPoll(250);

Server::Server(const ServeOptions& o)
    : options_(o),
      log_(o.log ? *o.log : std::cout),
      db_strand_(asio::make_strand(pool_)),
      acceptor_(io_),
      signals_(io_, SIGINT, SIGTERM),
      watchdog_(io_),
      recovery_(io_) {}

Status Server::Run() {
  HP_ASSIGN_OR_RETURN(tcp::endpoint ep, Resolve(io_, options_.listen));
  HP_ASSIGN_OR_RETURN(tls_, tls::TlsContext::Make(options_.credentials, tls::End::kServer));
  HP_ASSIGN_OR_RETURN(db_, storage::Storage::Open(options_.storage_path));
  HP_ASSIGN_OR_RETURN(const bool leads, Lead());
  if (!leads) return Status::Ok();  // stopped while a standby
  HP_RETURN_IF_ERROR(LoadSubmissions());
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Io("cannot listen on ", options_.listen, ": ", ec.message());
  auto local = acceptor_.local_endpoint();
  LogTransport(local.address());
  Log("listening on ", local.address().to_string(), ":", local.port());
  if (!options_.metrics_listen.empty()) {
    HP_ASSIGN_OR_RETURN(metrics_, ServerMetrics::Start(options_.metrics_listen));
    Log("metrics on http://", metrics_->address(), "/metrics");
  }
  signals_.async_wait([this](boost::system::error_code e, int) {
    if (!e) Stop();
  });
  asio::co_spawn(io_, Accept(), asio::detached);
  Watch();
  if (!queue_.empty()) {
    // What the last server launched must be gone before anything of it runs again.
    Log("resuming ", queue_.size(), " submitted studies after a restart, in ",
        FormatDuration(options_.heartbeat_timeout_s), " (the agents' fences stop what ran)");
    recovering_ = true;
    recovery_.expires_after(Seconds(options_.heartbeat_timeout_s));
    recovery_.async_wait([this](boost::system::error_code e) {
      if (e) return;
      recovering_ = false;
      StartQueued();
    });
  }
  io_.run();
  pool_.join();
  requests_pool_.join();
  return Status::Ok();
}

void Server::LogTransport(const asio::ip::address& address) {
  switch (tls_->mode()) {
    case tls::Mode::kPsk:
      Log("connections: TLS 1.3, both ends authenticated by the shared token (TLS-PSK)");
      break;
    case tls::Mode::kCertificates:
      Log("connections: TLS 1.3, both ends authenticated by certificates of ",
          options_.credentials.ca_file);
      break;
    case tls::Mode::kPlain:
      if (address.is_loopback())
        Log("connections: plaintext (--insecure), on loopback");
      else
        Log("warning: connections in plaintext (--insecure) on ", address.to_string(),
            ": anyone on the path can read every command and result and change them");
      break;
  }
}

Status Server::Launch(int64_t run, RankId id, int node, const SpawnRequest& r) {
  auto it = links_.find(node);
  if (it == links_.end() || it->second.lost)
    return Status::Unavailable("the agent of node ", node, " is gone");
  it->second.conn->Send(
      protocol::Launch{{run, id}, r.command, r.workdir, r.env, r.warm_argv, r.lock_path}.ToJson());
  UpdateMetrics();  // before the rank can start: a scrape after it sees it
  return Status::Ok();
}

void Server::Kill(int64_t run, RankId id, int node, int signal) {
  auto it = links_.find(node);
  if (it == links_.end() || it->second.lost) return;
  it->second.conn->Send(protocol::Kill{{run, id}, signal}.ToJson());
}

Result<bool> Server::Lead() {
  bool stop = false, said = false;
  signals_.async_wait([&stop](boost::system::error_code e, int) { stop = stop || !e; });
  Result<bool> leads = false;
  while (!stop) {
    leads = db_->TryLead();
    if (!leads.ok() || *leads) break;
    if (!said) Log("standby: another server leads ", db_->path(), "; taking over when it stops");
    said = true;
    std::this_thread::sleep_for(kStandbyPoll);
    io_.poll();  // a stop signal
  }
  signals_.cancel();
  io_.poll();
  io_.restart();
  if (leads.ok() && *leads && said) Log("taking over: this server now leads ", db_->path());
  return leads;
}

Status Server::LoadSubmissions() {
  HP_ASSIGN_OR_RETURN(std::vector<SubmissionRecord> all, db_->ListSubmissions());
  for (SubmissionRecord& r : all) {
    if (r.state == SubmissionState::kDone) {
      done_[r.id] = {r.exit_code, r.message};
      continue;
    }
    study::ParseOutcome parsed = study::ParseStudy(r.spec_text, r.spec_path);
    if (!parsed.spec) {  // cannot happen unless the file was edited: it parsed when submitted
      done_[r.id] = {2, parsed.ErrorText()};
      (void)db_->SetSubmissionState(r.id, SubmissionState::kDone, 2, parsed.ErrorText());
      continue;
    }
    queue_.push_back({std::move(r), std::move(*parsed.spec), {}});
  }
  return Status::Ok();
}

void Server::MarkSubmission(int64_t id, SubmissionState state, int code, std::string message) {
  asio::post(db_strand_, [this, id, state, code, message] {
    Status s = db_->SetSubmissionState(id, state, code, message);
    if (!s.ok())
      asio::post(io_, [this, s] { Log("cannot record a submission's state: ", s.message()); });
  });
}

asio::awaitable<void> Server::Accept() {
  return net::AcceptLoop(acceptor_, [this](tcp::socket socket) {
    asio::co_spawn(io_, Session(std::make_shared<Connection>(std::move(socket))), asio::detached);
  });
}

asio::awaitable<void> Server::Session(std::shared_ptr<Connection> c) {
  Result<protocol::Role> role = Status::Internal("no handshake");
  try {
    role = co_await protocol::ServerHandshake(*c, *tls_, options_.credentials.token,
                                              options_.heartbeat_timeout_s);
  } catch (const std::exception& e) {
    role = Status::Internal(e.what());
  }
  if (!role.ok()) {
    Log("rejected ", c->peer(), ": ", role.status().message());
    c->Close();
    co_return;
  }
  int node = -1;
  Status ended;
  try {
    switch (*role) {
      case protocol::Role::kAgent:
        ended = co_await AgentSession(c, &node);
        break;
      case protocol::Role::kClient:
        ended = co_await ClientSession(c);
        break;
    }
  } catch (const std::exception& e) {
    ended = Status::Internal(e.what());
  }
  if (!ended.ok()) {
    if (node >= 0) {
      NodeLost(node, ended.message());
    } else {
      Log("closed ", c->peer(), ": ", ended.message());
    }
  }
  c->Close();
}

asio::awaitable<Status> Server::AgentSession(std::shared_ptr<Connection> c, int* node) {
  Result<Json> first = co_await c->Receive();
  if (!first.ok()) co_return first.status();
  Result<FrameType> type = protocol::TypeOf(*first);
  if (!type.ok()) co_return type.status();
  if (*type != FrameType::kRegister) co_return Status::Invalid("an agent must register first");
  Result<protocol::Register> reg_read = protocol::Register::FromJson(*first);
  if (!reg_read.ok()) co_return reg_read.status();
  const protocol::Register& reg = *reg_read;
  Result<int> joined = Join(c, reg);
  if (!joined.ok()) co_return joined.status();
  *node = *joined;
  // What it still runs from before is no attempt of this server's: killed (its trials were
  // requeued when its node was lost, or when the server restarted).
  for (const RankRef& ref : reg.running) {
    Log("agent ", reg.name, " still runs trial ", ref.id.trial, " rank ", ref.id.rank,
        " of an attempt declared lost: killing it");
    c->Send(protocol::Kill{ref, SIGKILL}.ToJson());
  }
  while (true) {
    Result<Json> m = co_await c->Receive();
    if (!m.ok()) co_return m.status();
    links_[*node].last_seen = Clock::now();
    if (Status s = FromAgent(*node, *m); !s.ok()) co_return s;
  }
}

Result<int> Server::Join(const std::shared_ptr<Connection>& c, const protocol::Register& reg) {
  ClusterNode n;
  n.node.name = reg.name;
  n.gpu_names = reg.gpus;
  n.node.gpus = static_cast<int>(n.gpu_names.size());
  n.node.cpus = reg.cpus;
  n.node.gpu_memory_mb = reg.gpu_memory_mb;
  n.address = reg.address;
  if (n.address.empty()) n.address = c->peer().substr(0, c->peer().rfind(':'));
  if (n.node.gpus > 64 || n.node.cpus < 0 || n.node.cpus > 1 << 20 || n.node.gpu_memory_mb < 0 ||
      n.node.gpu_memory_mb > int64_t{1} << 40)
    return Status::Invalid("impossible node description");
  const int node = static_cast<int>(nodes_.size());
  nodes_.push_back(n);
  links_[node] = {c, n.node.name, Clock::now(), false};
  // Divided first, so that each study sees only its part of the node from the start.
  Arbitrate();
  for (auto& [id, a] : active_) a.run->AddNode(n);
  // The gauges are set before each line that tells of a change: a scrape after the line sees it.
  UpdateMetrics();
  Log("agent ", n.node.name, " joined from ", c->peer(), ": ", n.node.gpus, " GPUs",
      n.node.gpu_memory_mb > 0 ? StrCat(" of ", n.node.gpu_memory_mb, " MiB") : std::string(), ", ",
      n.node.cpus, " CPU slots");
  return node;
}

Status Server::FromAgent(int node, const Json& m) {
  HP_ASSIGN_OR_RETURN(const FrameType type, protocol::TypeOf(m));
  switch (type) {
    case FrameType::kHeartbeat: {
      HP_ASSIGN_OR_RETURN(const protocol::Heartbeat beat, protocol::Heartbeat::FromJson(m));
      links_[node].conn->Send(beat.ToJson());
      return Status::Ok();
    }
    case FrameType::kLine: {
      HP_ASSIGN_OR_RETURN(const protocol::Line line, protocol::Line::FromJson(m));
      if (AgentExecutor* e = ExecutorOf(node, line.ref))
        e->Line(line.ref.id, line.stream == protocol::Stream::kErr, line.text);
      return Status::Ok();
    }
    case FrameType::kExit: {
      HP_ASSIGN_OR_RETURN(const protocol::Exit exit, protocol::Exit::FromJson(m));
      if (AgentExecutor* e = ExecutorOf(node, exit.ref)) e->Exit(exit.ref.id, exit.exit);
      return Status::Ok();
    }
    default:
      return Status::Invalid("unexpected '", protocol::FrameTypeName(type),
                             "' frame from an agent");
  }
}

AgentExecutor* Server::ExecutorOf(int node, const RankRef& ref) {
  auto it = active_.find(ref.run);
  if (it == active_.end() || !it->second.executor->Expects(node, ref)) return nullptr;
  return it->second.executor.get();
}

void Server::NodeLost(int node, const std::string& why) {
  Link& l = links_[node];
  if (l.lost) return;
  l.lost = true;
  l.conn->Close();
  nodes_[node].node.gpus = 0;
  nodes_[node].node.cpus = 0;
  for (auto& [id, a] : active_) {
    a.run->RemoveNode(node);
    a.executor->NodeLost(node);
  }
  Arbitrate();
  if (metrics_) metrics_->AgentLost();
  UpdateMetrics();
  Log("agent ", l.name, " lost: ", why);
}

void Server::Watch() {
  watchdog_.expires_after(std::chrono::milliseconds(100));
  watchdog_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    auto limit = Seconds(options_.heartbeat_timeout_s);
    for (auto& [node, l] : links_)
      if (!l.lost && Clock::now() - l.last_seen > limit)
        NodeLost(node, StrCat("silent for ", FormatDuration(options_.heartbeat_timeout_s)));
    UpdateMetrics();
    Watch();
  });
}

void Server::UpdateMetrics() {
  if (!metrics_) return;
  ServerMetrics::Sample s;
  s.studies_queued = static_cast<int>(queue_.size());
  s.studies_running = static_cast<int>(active_.size());
  for (const auto& [node, l] : links_) s.agents += !l.lost;
  for (const ClusterNode& n : nodes_) {  // a lost node holds nothing
    s.run.gpus += n.node.gpus;
    s.run.cpus += n.node.cpus;
  }
  for (const auto& [id, a] : active_) {
    const Occupancy o = a.run->occupancy();
    s.run.running += o.running;
    s.run.waiting += o.waiting;
    s.run.paused += o.paused;
    s.run.finished += o.finished;
    s.run.completed += o.completed;
    s.run.pruned += o.pruned;
    s.run.failed += o.failed;
    s.run.infeasible += o.infeasible;
    s.run.gpus_busy += o.gpus_busy;
    s.run.cpus_busy += o.cpus_busy;
  }
  metrics_->Set(s);
}

void Server::Stop() {
  stopping_ = true;
  Log("stopping");
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  recovery_.cancel();
  if (active_.empty()) {
    io_.stop();
    return;
  }
  // Finished() stops the io_context when the last run is over.
  for (auto& [id, a] : active_) a.run->Interrupt();
}

Status AgentExecutor::Start(RankId id, int node, const SpawnRequest& request) {
  HP_RETURN_IF_ERROR(server_->Launch(run_, id, node, request));
  where_[id] = node;
  return Status::Ok();
}

void AgentExecutor::Signal(RankId id, int signal) {
  auto it = where_.find(id);
  if (it != where_.end()) server_->Kill(run_, id, it->second, signal);
}

}  // namespace serve

std::string protocol_ReadToken(const std::string& path, std::string* error) {
  return protocol::ReadTokenFile(path, error);
}

Status Serve(const ServeOptions& options) {
  if (options.credentials.token.empty())
    return Status::Invalid("a token is required (--token-file)");
  try {
    return serve::Server(options).Run();
  } catch (const std::exception& e) {
    return Status::Io("server: ", e.what());
  }
}

}  // namespace hyperpack::scheduler
