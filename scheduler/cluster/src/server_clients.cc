// hyperpack serve's clients (server_impl.h; what the server does: server.cc): a client's session,
// its requests (remote.h), and the submissions it follows, from submitted through started beside
// the others, each on its share (Arbitrate), to ended.
#include <boost/asio.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/host.h"
#include "hyperpack/placement/fair_share.h"
#include "hyperpack/scheduler/study_run.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "protocol.h"
#include "requests.h"
#include "server_impl.h"

namespace hyperpack::scheduler::serve {

asio::awaitable<Status> Server::ClientSession(std::shared_ptr<Connection> c) {
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

asio::awaitable<Status> Server::RequestSession(std::shared_ptr<Connection> c, const Json& frame) {
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

asio::awaitable<protocol::Reply> Server::CarryOut(std::string url, protocol::Request request) {
  co_return HandleRequest(url, request);
}

int64_t Server::Follow(const std::shared_ptr<Connection>& c, int64_t id) {
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

bool Server::Enqueue(const std::shared_ptr<Connection>& c, const protocol::Submit& submit,
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

Server::Submission* Server::Find(int64_t id) {
  if (auto it = active_.find(id); it != active_.end()) return &it->second.sub;
  for (Submission& s : queue_)
    if (s.record.id == id) return &s;
  return nullptr;
}

void Server::Cancel(int64_t id, const std::shared_ptr<Connection>& c) {
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

void Server::Ended(Submission& s, int code, const std::string& message) {
  done_[s.record.id] = {code, message};
  MarkSubmission(s.record.id, SubmissionState::kDone, code, message);
  for (auto& weak : s.followers)
    if (auto f = weak.lock()) f->Send(protocol::Done{code, message}.ToJson());
}

void Server::StartQueued() {
  while (!queue_.empty() && !stopping_ && !recovering_) {
    Submission next = std::move(queue_.front());
    queue_.pop_front();
    Start(std::move(next));
  }
}

void Server::Start(Submission sub) {
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

void Server::Tell(int64_t id, const std::string& line) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  for (auto& weak : it->second.sub.followers)
    if (auto f = weak.lock()) f->Send(protocol::Progress{line}.ToJson());
}

void Server::Arbitrate() {
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
            grants[i].limit.slots, " CPU slots (priority ", FormatShort(claims[i].weight, 4), ", ",
            ids.size(), " studies running)");
      a.run->SetShare(grants[i]);
    }
    if (!rearbitrate_) break;
  }
  arbitrating_ = false;
}

void Server::Finished(int64_t id, int code, const std::string& message) {
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

}  // namespace hyperpack::scheduler::serve
