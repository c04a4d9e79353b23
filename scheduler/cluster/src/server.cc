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
#include <deque>
#include <iostream>
#include <map>
#include <thread>

#include "hyperpack/host.h"
#include "hyperpack/net/accept.h"
#include "hyperpack/placement/fair_share.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "net.h"
#include "protocol.h"
#include "requests.h"
#include "server_metrics.h"

namespace hyperpack::scheduler {
namespace {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::FrameType;
using protocol::Json;
using protocol::RankRef;
using storage::SubmissionRecord;
using storage::SubmissionState;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// How often a standby asks for the leader lease: a takeover comes within this of the lease's end.
constexpr std::chrono::milliseconds kStandbyPoll(250);

class Server;

// Ranks started through the agents' connections, for one running study (its run is its
// submission's id, which every launch names). A frame counts only when it names a rank of this
// run, from the node that runs it: anything else is an attempt that was declared lost (or a run
// that is over) and is ignored.
class AgentExecutor : public Executor {
 public:
  AgentExecutor(Server* server, int64_t run) : server_(server), run_(run) {}
  void SetCallbacks(Callbacks cb) override { cb_ = std::move(cb); }
  Status Start(RankId id, int node, const SpawnRequest& request) override;
  void Signal(RankId id, int signal) override;
  void Shutdown() override {}
  // True when the rank is one this run expects from `node`.
  bool Expects(int node, const RankRef& ref) const {
    auto it = where_.find(ref.id);
    return ref.run == run_ && it != where_.end() && it->second == node;
  }
  void Line(RankId id, bool is_err, const std::string& text) {
    if (cb_.on_line) cb_.on_line(id, is_err, text);
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
  int64_t run() const { return run_; }

 private:
  Server* server_;
  Callbacks cb_;
  int64_t run_ = 0;
  std::map<RankId, int> where_;
};

class Server {
 public:
  explicit Server(const ServeOptions& o)
      : options_(o),
        log_(o.log ? *o.log : std::cout),
        db_strand_(asio::make_strand(pool_)),
        acceptor_(io_),
        signals_(io_, SIGINT, SIGTERM),
        watchdog_(io_),
        recovery_(io_) {}

  Status Run() {
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

  // What protects the connections, said once; plaintext beyond loopback is a warning.
  void LogTransport(const asio::ip::address& address) {
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

  // Called by the executors.
  Status Launch(int64_t run, RankId id, int node, const SpawnRequest& r) {
    auto it = links_.find(node);
    if (it == links_.end() || it->second.lost)
      return Status::Unavailable("the agent of node ", node, " is gone");
    it->second.conn->Send(
        protocol::Launch{{run, id}, r.command, r.workdir, r.env, r.warm_argv}.ToJson());
    UpdateMetrics();  // before the rank can start: a scrape after it sees it
    return Status::Ok();
  }
  void Kill(int64_t run, RankId id, int node, int signal) {
    auto it = links_.find(node);
    if (it == links_.end() || it->second.lost) return;
    it->second.conn->Send(protocol::Kill{{run, id}, signal}.ToJson());
  }

 private:
  struct Link {
    std::shared_ptr<Connection> conn;
    std::string name;
    Clock::time_point last_seen;
    bool lost = false;
  };
  // A submitted study and the clients following it.
  struct Submission {
    SubmissionRecord record;
    study::StudySpec spec;
    std::vector<std::weak_ptr<Connection>> followers;
  };
  // A submission running now, beside the others.
  struct Active {
    Submission sub;
    std::unique_ptr<AgentExecutor> executor;
    std::unique_ptr<StudyRun> run;
    std::optional<ShareGrant> granted;  // the share it was last given
  };

  template <typename... Args>
  void Log(const Args&... args) {
    log_ << "[" << FormatTimestamp(WallNow()) << "] " << StrCat(args...) << std::endl;
  }

  // Before serving: the storage's leader lease (Storage::TryLead). Where another server on this
  // storage holds it, this one is its standby: it neither listens nor loads anything until that
  // server's lease ends (its process or its database session died), then carries on as a server
  // started again on the same storage does. False when stopped (SIGINT, SIGTERM) while waiting.
  Result<bool> Lead() {
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

  // Before serving: the submissions a server left unfinished.
  Status LoadSubmissions() {
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

  // Storage work goes to the pool, in order, never on the io thread.
  void MarkSubmission(int64_t id, SubmissionState state, int code = 0, std::string message = "") {
    asio::post(db_strand_, [this, id, state, code, message] {
      Status s = db_->SetSubmissionState(id, state, code, message);
      if (!s.ok())
        asio::post(io_, [this, s] { Log("cannot record a submission's state: ", s.message()); });
    });
  }

  asio::awaitable<void> Accept() {
    return net::AcceptLoop(acceptor_, [this](tcp::socket socket) {
      asio::co_spawn(io_, Session(std::make_shared<Connection>(std::move(socket))), asio::detached);
    });
  }

  // One connection. Whatever goes wrong in it (a bad frame, a closed socket, a bug that throws)
  // ends it, and only it.
  asio::awaitable<void> Session(std::shared_ptr<Connection> c) {
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

  // An agent's connection until it breaks: the status that ended it.
  asio::awaitable<Status> AgentSession(std::shared_ptr<Connection> c, int* node) {
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

  // A registered agent's node joins the cluster (and the running study); returns its index.
  Result<int> Join(const std::shared_ptr<Connection>& c, const protocol::Register& reg) {
    ClusterNode n;
    n.node.name = reg.name;
    n.gpu_names = reg.gpus;
    n.node.gpus = static_cast<int>(n.gpu_names.size());
    n.node.cpus = reg.cpus;
    n.address = reg.address;
    if (n.address.empty()) n.address = c->peer().substr(0, c->peer().rfind(':'));
    if (n.node.gpus > 64 || n.node.cpus < 0 || n.node.cpus > 1 << 20)
      return Status::Invalid("impossible node description");
    const int node = static_cast<int>(nodes_.size());
    nodes_.push_back(n);
    links_[node] = {c, n.node.name, Clock::now(), false};
    // Divided first, so that each study sees only its part of the node from the start.
    Arbitrate();
    for (auto& [id, a] : active_) a.run->AddNode(n);
    // The gauges are set before each line that tells of a change: a scrape after the line sees it.
    UpdateMetrics();
    Log("agent ", n.node.name, " joined from ", c->peer(), ": ", n.node.gpus, " GPUs, ",
        n.node.cpus, " CPU slots");
    return node;
  }

  // A frame from a registered agent; an error ends its connection.
  Status FromAgent(int node, const Json& m) {
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

  // The executor of the running study that expects this rank from this node; null: ignored.
  AgentExecutor* ExecutorOf(int node, const RankRef& ref) {
    auto it = active_.find(ref.run);
    if (it == active_.end() || !it->second.executor->Expects(node, ref)) return nullptr;
    return it->second.executor.get();
  }

  void NodeLost(int node, const std::string& why) {
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

  void Watch() {
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

  void UpdateMetrics() {
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

  // ---- Clients ----
  // A client's connection until it breaks (the status that ended it) or its study is refused (OK).
  asio::awaitable<Status> ClientSession(std::shared_ptr<Connection> c) {
    Result<Json> m = co_await c->Receive();
    if (!m.ok()) co_return m.status();
    Result<FrameType> type = protocol::TypeOf(*m);
    if (!type.ok()) co_return type.status();
    if (*type == FrameType::kRequest) co_return co_await RequestSession(c, *m);
    if (*type != FrameType::kSubmit)
      co_return Status::Invalid("a client must submit a study or send a request");
    Result<protocol::Submit> submit = protocol::Submit::FromJson(*m);
    if (!submit.ok()) co_return submit.status();
    // Set once the submission is known (stored, for a new one).
    auto id = std::make_shared<int64_t>(0);
    if (submit->submission) *id = Follow(c, *submit->submission);
    if (*id == 0 && !Enqueue(c, *submit, id)) co_return Status::Ok();
    // The client follows until its study is done. If it goes away, the study goes on (it may
    // reconnect); a cancel frame stops it.
    while (true) {
      Result<Json> next = co_await c->Receive();
      if (!next.ok()) co_return next.status();
      Result<FrameType> next_type = protocol::TypeOf(*next);
      if (!next_type.ok()) co_return next_type.status();
      if (*next_type == FrameType::kCancel && *id != 0) Cancel(*id, c);
    }
  }

  // A request about a stored study (remote.h): carried out on the requests' pool, which may wait
  // for a study's runner, then answered; the client closes once it has read the answer.
  asio::awaitable<Status> RequestSession(std::shared_ptr<Connection> c, const Json& frame) {
    Result<protocol::Request> request = protocol::Request::FromJson(frame);
    if (!request.ok()) co_return request.status();
    Log("request on study ", request->study, " from ", c->peer());
    protocol::Reply reply = co_await asio::co_spawn(
        requests_pool_, CarryOut(options_.storage_path, *std::move(request)), asio::use_awaitable);
    c->Send(reply.ToJson());
    Result<Json> after = co_await c->Receive();
    (void)after;  // the client hangs up once it has the answer
    co_return Status::Ok();
  }

  // The request, on whichever executor runs the coroutine (the requests' pool). Its arguments are
  // copies: they live in the coroutine's frame.
  static asio::awaitable<protocol::Reply> CarryOut(std::string url, protocol::Request request) {
    co_return HandleRequest(url, request);
  }

  // An earlier submission followed again: its id, or 0 when this server does not know it.
  int64_t Follow(const std::shared_ptr<Connection>& c, int64_t id) {
    if (auto done = done_.find(id); done != done_.end()) {
      c->Send(protocol::Accepted{id}.ToJson());
      c->Send(protocol::Done{done->second.first, done->second.second}.ToJson());
      return id;
    }
    Submission* s = Find(id);
    if (!s) return 0;
    s->followers.push_back(c);
    c->Send(protocol::Accepted{id}.ToJson());
    const bool running = active_.count(id) > 0;
    c->Send(protocol::Progress{
        StrCat("following study ", s->spec.name, " again (", running ? "running" : "queued", ")")}
                .ToJson());
    return id;
  }

  // A new submission: parsed, then stored on the pool and queued once stored (*id is set then).
  // False when it was refused at once.
  bool Enqueue(const std::shared_ptr<Connection>& c, const protocol::Submit& submit,
               std::shared_ptr<int64_t> id) {
    study::ParseOutcome parsed = study::ParseStudy(submit.study_text, submit.study_path);
    if (!parsed.spec) {
      c->Send(protocol::Done{2, parsed.ErrorText()}.ToJson());
      return false;
    }
    Log("study ", parsed.spec->name, " submitted by ", c->peer());
    for (const study::Diagnostic& w : parsed.warnings)
      Log("study ", parsed.spec->name, ": ", w.ToString());
    SubmissionRecord r;
    r.study_name = parsed.spec->name;
    r.spec_text = submit.study_text;
    r.spec_path = submit.study_path;
    r.max_trials = submit.max_trials;
    r.max_parallel = submit.max_parallel;
    r.submitted = WallNow();
    auto spec = std::make_shared<study::StudySpec>(std::move(*parsed.spec));
    std::weak_ptr<Connection> weak = c;
    asio::post(db_strand_, [this, r, spec, weak, id] {
      auto added = std::make_shared<Result<int64_t>>(db_->AddSubmission(r));
      asio::post(io_, [this, r, spec, weak, id, added]() mutable {
        auto client = weak.lock();
        if (!added->ok()) {
          if (client)
            client->Send(protocol::Done{1, "storage: " + added->status().message()}.ToJson());
          return;
        }
        r.id = **added;
        *id = r.id;
        Log("study ", r.study_name, " queued as submission ", r.id);
        Submission s{r, std::move(*spec), {}};
        if (client) {
          s.followers.push_back(client);
          client->Send(protocol::Accepted{r.id}.ToJson());
          if (recovering_) {
            client->Send(
                protocol::Progress{"queued: the server resumes its studies after a "
                                   "restart first"}
                    .ToJson());
          } else if (!active_.empty()) {
            client->Send(protocol::Progress{StrCat("starting beside ", active_.size(),
                                                   " running studies, on its share (priority ",
                                                   FormatShort(s.spec.priority, 4), ")")}
                             .ToJson());
          }
        }
        queue_.push_back(std::move(s));
        StartQueued();
      });
    });
    return true;
  }

  Submission* Find(int64_t id) {
    if (auto it = active_.find(id); it != active_.end()) return &it->second.sub;
    for (Submission& s : queue_)
      if (s.record.id == id) return &s;
    return nullptr;
  }

  void Cancel(int64_t id, const std::shared_ptr<Connection>& c) {
    if (auto it = active_.find(id); it != active_.end()) {
      Log("study ", it->second.sub.spec.name, " cancelled by ", c->peer());
      it->second.run->Interrupt();
      return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->record.id != id) continue;
      Log("study ", it->spec.name, " cancelled by ", c->peer(), " before it started");
      Submission s = std::move(*it);
      queue_.erase(it);
      Ended(s, 130, "cancelled before it started");
      return;
    }
  }

  // Tells the followers and stores the end.
  void Ended(Submission& s, int code, const std::string& message) {
    done_[s.record.id] = {code, message};
    MarkSubmission(s.record.id, SubmissionState::kDone, code, message);
    for (auto& weak : s.followers)
      if (auto f = weak.lock()) f->Send(protocol::Done{code, message}.ToJson());
  }

  // Every submission waiting starts now, on its share.
  void StartQueued() {
    while (!queue_.empty() && !stopping_ && !recovering_) {
      Submission next = std::move(queue_.front());
      queue_.pop_front();
      Start(std::move(next));
    }
  }

  void Start(Submission sub) {
    const int64_t id = sub.record.id;
    MarkSubmission(id, SubmissionState::kRunning);
    Active& a = active_[id];
    a.sub = std::move(sub);
    a.executor = std::make_unique<AgentExecutor>(this, id);
    RunOptions ro;
    ro.storage_path = options_.storage_path;
    ro.log_dir = options_.log_dir;
    ro.max_trials = a.sub.record.max_trials;
    ro.max_parallel = a.sub.record.max_parallel;
    ro.handle_signals = false;
    ro.preempt_after_s = options_.preempt_after_s;
    ro.on_progress = [this, id](const std::string& line) { Tell(id, line); };
    ro.on_proposed = [this](double seconds, int) {
      if (metrics_) metrics_->Proposed(seconds);
    };
    a.run = MakeStudyRun(a.sub.spec, ro, io_, pool_, nodes_, a.executor.get());
    a.run->OnChange([this] { Arbitrate(); });
    if (active_.size() > 1)
      Log("study ", a.sub.spec.name, " starts beside ", active_.size() - 1,
          " running studies, on its share (priority ", FormatShort(a.sub.spec.priority, 4), ")");
    Arbitrate();  // before it is prepared: it holds nothing, and may take nothing yet
    UpdateMetrics();
    Status begun = a.run->Begin([this, id](Result<RunSummary> r) {
      // A study that could not start for what it asked (a different space, a live runner) is bad
      // input (2); one that failed in storage, 1.
      int code = r.ok() ? r->exit_code : r.status().code() == StatusCode::kIo ? 1 : 2;
      std::string message = r.ok() ? std::string() : r.status().message();
      asio::post(io_, [this, id, code, message] { Finished(id, code, message); });
    });
    if (!begun.ok()) {
      const std::string message = begun.message();
      asio::post(io_, [this, id, message] { Finished(id, 2, message); });
    }
  }

  void Tell(int64_t id, const std::string& line) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    for (auto& weak : it->second.sub.followers)
      if (auto f = weak.lock()) f->Send(protocol::Progress{line}.ToJson());
  }

  // Divides the nodes between the running studies again (fair_share.h), after anything that may
  // change what one holds or wants. One study alone is not limited. A study's share changes only
  // through here, and what two studies may place on never overlaps, so none can take a unit
  // another holds or was given, whichever of them handles an event first.
  void Arbitrate() {
    if (arbitrating_) {
      rearbitrate_ = true;  // a study's share changed what it holds: once more after this pass
      return;
    }
    arbitrating_ = true;
    for (int pass = 0; pass < 16; ++pass) {
      rearbitrate_ = false;
      Division now;
      for (const ClusterNode& n : nodes_) now.capacity.push_back(n.node);
      for (auto& [id, a] : active_) {
        now.ids.push_back(id);
        // Not prepared yet: it holds nothing, and takes nothing until it says what it wants.
        if (active_.size() > 1)
          now.claims.push_back(
              a.run->Claim().value_or(ShareClaim{a.sub.spec.priority, {}, 0, 0, 0, 0}));
      }
      // Most events (a metric line) change nothing a grant depends on.
      if (now == division_) break;
      division_ = now;
      const std::vector<int64_t>& ids = now.ids;
      const std::vector<ShareClaim>& claims = now.claims;
      std::vector<ShareGrant> grants;
      if (ids.size() == 1) {
        grants.push_back({{}, std::vector<NodeUnits>(nodes_.size())});  // alone: no limit
      } else {
        grants = DivideCapacity(now.capacity, claims);
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        auto it = active_.find(ids[i]);
        if (it == active_.end() || it->second.granted == grants[i]) continue;
        Active& a = it->second;
        const bool limit_changed = !a.granted || a.granted->limit.gpus != grants[i].limit.gpus ||
                                   a.granted->limit.slots != grants[i].limit.slots;
        a.granted = grants[i];
        if (limit_changed && ids.size() > 1)
          Log("study ", a.sub.spec.name, ": share ", grants[i].limit.gpus, " GPUs, ",
              grants[i].limit.slots, " CPU slots (priority ", FormatShort(claims[i].weight, 4),
              ", ", ids.size(), " studies running)");
        a.run->SetShare(grants[i]);
      }
      if (!rearbitrate_) break;
    }
    arbitrating_ = false;
  }

  void Finished(int64_t id, int code, const std::string& message) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    Submission s = std::move(it->second.sub);
    // The run is over and posted this from its own callback: it can go now.
    active_.erase(it);
    if (stopping_) {
      // Stopped with the server: it resumes when the server starts again on this storage.
      for (auto& weak : s.followers)
        if (auto f = weak.lock()) {
          f->Send(
              protocol::Progress{"the server is stopping; the study resumes when it is "
                                 "started again"}
                  .ToJson());
          f->Close();
        }
      if (active_.empty()) io_.stop();
      return;
    }
    UpdateMetrics();
    Log("study ", s.spec.name, " done (exit ", code, ")");
    Ended(s, code, message);
    Arbitrate();  // the others grow into what it held
  }

  void Stop() {
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

  ServeOptions options_;
  std::ostream& log_;
  asio::io_context io_;
  // A study's start and end (SQLite, joins), its tuner and the submissions' rows run here, never
  // on the io thread.
  asio::thread_pool pool_{2};
  // Requests (remote.h) apart from the runs' storage and tuner work: a control waits for a study's
  // runner, whose reads run on pool_.
  asio::thread_pool requests_pool_{2};
  asio::strand<asio::thread_pool::executor_type> db_strand_;
  std::unique_ptr<storage::Storage> db_;  // on db_strand_ once serving
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer watchdog_;
  asio::steady_timer recovery_;
  std::vector<ClusterNode> nodes_;  // every node that ever joined; lost ones hold nothing
  std::map<int, Link> links_;
  std::deque<Submission> queue_;      // submitted, not started (only while recovering)
  std::map<int64_t, Active> active_;  // by submission id
  std::map<int64_t, std::pair<int, std::string>> done_;  // exit code and message
  std::unique_ptr<ServerMetrics> metrics_;               // with --metrics
  std::shared_ptr<tls::TlsContext> tls_;                 // every connection's, made in Run
  bool recovering_ = false;
  bool stopping_ = false;
  bool arbitrating_ = false, rearbitrate_ = false;
  // What the grants were last divided from: the nodes, the studies, and their claims (with more
  // than one study).
  struct Division {
    std::vector<Node> capacity;
    std::vector<int64_t> ids;
    std::vector<ShareClaim> claims;
    bool operator==(const Division&) const = default;
  };
  Division division_;
};

Status AgentExecutor::Start(RankId id, int node, const SpawnRequest& request) {
  HP_RETURN_IF_ERROR(server_->Launch(run_, id, node, request));
  where_[id] = node;
  return Status::Ok();
}

void AgentExecutor::Signal(RankId id, int signal) {
  auto it = where_.find(id);
  if (it != where_.end()) server_->Kill(run_, id, it->second, signal);
}

}  // namespace

std::string protocol_ReadToken(const std::string& path, std::string* error) {
  return protocol::ReadTokenFile(path, error);
}

Status Serve(const ServeOptions& options) {
  if (options.credentials.token.empty())
    return Status::Invalid("a token is required (--token-file)");
  try {
    return Server(options).Run();
  } catch (const std::exception& e) {
    return Status::Io("server: ", e.what());
  }
}

}  // namespace hyperpack::scheduler
