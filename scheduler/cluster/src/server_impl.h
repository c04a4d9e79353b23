// The server of `hyperpack serve` (what it does, and what survives what: server.cc), declared for
// the two files that define it: server.cc (startup, leadership and standby, accepting, agents, the
// executors' calls) and server_clients.cc (clients, requests, submissions and the studies' shares).
// Private to hyperpack_cluster.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/host.h"
#include "hyperpack/placement/fair_share.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "protocol.h"
#include "server_metrics.h"
#include "tls.h"

namespace hyperpack::scheduler::serve {

namespace asio = boost::asio;
using protocol::Connection;
using protocol::FrameType;
using protocol::Json;
using protocol::RankRef;
using storage::SubmissionRecord;
using storage::SubmissionState;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

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
  explicit Server(const ServeOptions& o);

  Status Run();

  // What protects the connections, said once; plaintext beyond loopback is a warning.
  void LogTransport(const asio::ip::address& address);

  // Called by the executors.
  Status Launch(int64_t run, RankId id, int node, const SpawnRequest& r);
  void Kill(int64_t run, RankId id, int node, int signal);

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
  Result<bool> Lead();

  // Before serving: the submissions a server left unfinished.
  Status LoadSubmissions();

  // Storage work goes to the pool, in order, never on the io thread.
  void MarkSubmission(int64_t id, SubmissionState state, int code = 0, std::string message = "");

  asio::awaitable<void> Accept();

  // One connection. Whatever goes wrong in it (a bad frame, a closed socket, a bug that throws)
  // ends it, and only it.
  asio::awaitable<void> Session(std::shared_ptr<Connection> c);

  // An agent's connection until it breaks: the status that ended it.
  asio::awaitable<Status> AgentSession(std::shared_ptr<Connection> c, int* node);

  // A registered agent's node joins the cluster (and the running study); returns its index.
  Result<int> Join(const std::shared_ptr<Connection>& c, const protocol::Register& reg);

  // A frame from a registered agent; an error ends its connection.
  Status FromAgent(int node, const Json& m);

  // The executor of the running study that expects this rank from this node; null: ignored.
  AgentExecutor* ExecutorOf(int node, const RankRef& ref);

  void NodeLost(int node, const std::string& why);

  void Watch();

  void UpdateMetrics();

  // ---- Clients ----
  // A client's connection until it breaks (the status that ended it) or its study is refused (OK).
  asio::awaitable<Status> ClientSession(std::shared_ptr<Connection> c);

  // A request about a stored study (remote.h): carried out on the requests' pool, which may wait
  // for a study's runner, then answered; the client closes once it has read the answer.
  asio::awaitable<Status> RequestSession(std::shared_ptr<Connection> c, const Json& frame);

  // The request, on whichever executor runs the coroutine (the requests' pool). Its arguments are
  // copies: they live in the coroutine's frame.
  static asio::awaitable<protocol::Reply> CarryOut(std::string url, protocol::Request request);

  // An earlier submission followed again: its id, or 0 when this server does not know it.
  int64_t Follow(const std::shared_ptr<Connection>& c, int64_t id);

  // A new submission: parsed, then stored on the pool and queued once stored (*id is set then).
  // False when it was refused at once.
  bool Enqueue(const std::shared_ptr<Connection>& c, const protocol::Submit& submit,
               std::shared_ptr<int64_t> id);

  Submission* Find(int64_t id);

  void Cancel(int64_t id, const std::shared_ptr<Connection>& c);

  // Tells the followers and stores the end.
  void Ended(Submission& s, int code, const std::string& message);

  // Every submission waiting starts now, on its share.
  void StartQueued();

  void Start(Submission sub);

  void Tell(int64_t id, const std::string& line);

  // Divides the nodes between the running studies again (fair_share.h), after anything that may
  // change what one holds or wants. One study alone is not limited. A study's share changes only
  // through here, and what two studies may place on never overlaps, so none can take a unit
  // another holds or was given, whichever of them handles an event first.
  void Arbitrate();

  void Finished(int64_t id, int code, const std::string& message);

  void Stop();

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

}  // namespace hyperpack::scheduler::serve
