// Requests about a stored study through the server (remote.h): each op's body on the wire, the
// server's side (HandleRequest) and the client's (one connection a request).
#include "requests.h"

#include <boost/asio.hpp>
#include <cmath>

#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/remote.h"
#include "net.h"

namespace hyperpack::scheduler {

namespace asio = boost::asio;
using protocol::FrameReader;
using protocol::Json;
using protocol::Reply;
using protocol::Request;
using protocol::RequestOp;
using tcp = asio::ip::tcp;

namespace {

// ---- Bodies on the wire ----

template <typename T>
std::optional<T> OptionalField(FrameReader& r, const char* key) {
  if (!r.Has(key)) return std::nullopt;
  return r.Field<T>(key);
}

// A control request as its body: its arguments as storage keeps them (storage::ControlArgs),
// the verb, and how the rest was given.
Json ControlJson(const ControlRequest& r) {
  Json j = Json::parse(storage::EncodeControlArgs(r));
  j["verb"] = VerbName(r.verb);
  j["params_json"] = r.params_json;
  j["results_text"] = r.results_text;
  j["results_path"] = r.results_path;
  j["retry_failed"] = r.retry_failed;
  j["retry_trials"] = r.retry_trials;
  return j;
}

Result<ControlRequest> ControlFromJson(const Json& body, const std::string& study) {
  FrameReader r(body);
  ControlRequest out;
  out.study = study;
  const std::string verb = r.Field<std::string>("verb");
  out.params_json = r.Optional<std::string>("params_json", "");
  out.results_text = r.Optional<std::string>("results_text", "");
  out.results_path = r.Optional<std::string>("results_path", "results");
  out.retry_failed = r.Optional<bool>("retry_failed", false);
  out.retry_trials = r.Optional<std::vector<int>>("retry_trials", {});
  if (!r.ok()) return r.status();
  const std::optional<Verb> parsed = ParseVerb(verb);
  if (!parsed) return Status::Invalid("request: unknown verb '", verb, "'");
  out.verb = *parsed;
  Result<storage::ControlArgs> args = storage::ParseControlArgs(body.dump());
  if (!args.ok()) return Status::Invalid("request: ", args.status().message());
  static_cast<storage::ControlArgs&>(out) = *std::move(args);
  return out;
}

Json AnswerJson(const ControlAnswer& a) {
  return {{"study", a.study}, {"verb", VerbName(a.verb)}, {"refused", a.refused},
          {"kept", a.kept},   {"live", a.live},           {"outcome", a.outcome}};
}

Result<ControlAnswer> AnswerFromJson(const Json& body) {
  FrameReader r(body);
  ControlAnswer a;
  a.study = r.Field<std::string>("study");
  const std::string verb = r.Field<std::string>("verb");
  a.refused = r.Field<bool>("refused");
  a.kept = r.Optional<bool>("kept", false);
  a.live = r.Optional<bool>("live", false);
  a.outcome = r.Field<std::string>("outcome");
  if (!r.ok()) return r.status();
  const std::optional<Verb> parsed = ParseVerb(verb);
  if (!parsed) return Status::Invalid("reply: unknown verb '", verb, "'");
  a.verb = *parsed;
  return a;
}

// ---- The server's side ----

Result<Json> Carry(storage::Storage& db, const Request& q) {
  switch (q.op) {
    case RequestOp::kControl: {
      HP_ASSIGN_OR_RETURN(ControlRequest r, ControlFromJson(q.body, q.study));
      HP_ASSIGN_OR_RETURN(ControlAnswer a, ApplyControl(db, r));
      return AnswerJson(a);
    }
    case RequestOp::kConditions: {
      HP_ASSIGN_OR_RETURN(auto conditions, report::ReadConditions(db, q.study));
      return Json{{"conditions", Json::parse(report::ConditionsJson(conditions))}};
    }
    case RequestOp::kLogs: {
      FrameReader r(q.body);
      const std::optional<int> trial = OptionalField<int>(r, "trial");
      const int64_t from = r.Optional<int64_t>("from", 0);
      if (!r.ok()) return r.status();
      HP_ASSIGN_OR_RETURN(report::LogChunk chunk, report::ReadLogs(db, q.study, trial, from));
      // Bytes of a log need not be UTF-8: replaced on the wire, as in every frame.
      return Json{{"text", chunk.text}, {"next", chunk.next}, {"over", chunk.over}};
    }
    case RequestOp::kAsk: {
      HP_ASSIGN_OR_RETURN(AskedTrial asked, Ask(db, q.study, "via the server", WallNow()));
      return Json{{"trial", asked.number}, {"params", storage::EncodeParams(asked.params)}};
    }
    case RequestOp::kTell: {
      FrameReader r(q.body);
      const int number = r.Field<int>("trial");
      const std::string state = r.Optional<std::string>("state", "completed");
      Tell tell;
      tell.value = OptionalField<double>(r, "value");
      tell.step = OptionalField<int64_t>(r, "step");
      tell.values = r.Optional<std::map<std::string, double>>("values", {});
      if (!r.ok()) return r.status();
      const std::optional<storage::TrialState> parsed = storage::ParseTrialState(state);
      if (!parsed) return Status::Invalid("tell: unknown state '", state, "'");
      tell.state = *parsed;
      HP_RETURN_IF_ERROR(TellTrial(db, q.study, number, tell, WallNow()));
      return Json::object();
    }
    case RequestOp::kHeartbeat: {
      FrameReader r(q.body);
      const int number = r.Field<int>("trial");
      if (!r.ok()) return r.status();
      HP_RETURN_IF_ERROR(HeartbeatTrial(db, q.study, number, WallNow()));
      return Json::object();
    }
  }
  return Status::Internal("an op without a handler");
}

// ---- The client's side ----

// Tries each server in turn until one answers `frame`; the reply's body, or its error, in *result.
// A coroutine function, not a lambda: its arguments live in its own frame.
asio::awaitable<void> CallServers(asio::io_context& io, std::vector<ServerAddress> servers,
                                  std::shared_ptr<tls::TlsContext> tls, std::string token,
                                  Json frame, Result<Json>* result) {
  for (const ServerAddress& address : servers) {
    tcp::socket socket(io);
    boost::system::error_code ec;
    co_await socket.async_connect(address.endpoint, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      *result = Status::Io(address.text, ": ", ec.message());
      continue;  // a standby may be the one that serves
    }
    // Shared: its writes keep it alive until they complete.
    auto conn = std::make_shared<protocol::Connection>(std::move(socket));
    auto welcome = co_await protocol::ClientHandshake(*conn, *tls, address.host, token,
                                                      protocol::Role::kClient);
    if (!welcome.ok()) {
      *result = welcome.status();
      continue;
    }
    conn->Send(frame);
    Result<Json> m = co_await conn->Receive();
    conn->Close();
    if (!m.ok()) {
      *result = Status::Io(address.text, ": ", m.status().message(),
                           " (a server older than this hyperpack takes no requests)");
      continue;
    }
    Result<Reply> reply = Reply::FromJson(*m);
    if (!reply.ok()) {
      *result = reply.status();
    } else if (reply->code != 0) {
      // A code this client does not know reads as the server failing.
      const bool known =
          reply->code > 0 && reply->code <= static_cast<int>(StatusCode::kDeadlineExceeded);
      *result =
          Status(known ? static_cast<StatusCode>(reply->code) : StatusCode::kIo, reply->message);
    } else {
      *result = std::move(reply->body);
    }
    co_return;
  }
}

// Sends `request` to the first server that answers and returns its reply's body, or its error.
Result<Json> Call(const std::string& server, const Credentials& credentials,
                  const Request& request) {
  asio::io_context io;
  HP_ASSIGN_OR_RETURN(std::vector<ServerAddress> servers, ResolveAll(io, server));
  HP_ASSIGN_OR_RETURN(auto tls, tls::TlsContext::Make(credentials, tls::End::kClient));
  Result<Json> result = Status::Io(server, ": no server answered");
  asio::co_spawn(io,
                 CallServers(io, std::move(servers), std::move(tls), credentials.token,
                             request.ToJson(), &result),
                 asio::detached);
  io.run();
  return result;
}

}  // namespace

Reply HandleRequest(const std::string& storage_url, const Request& request) {
  Reply reply;
  Result<Json> body = [&]() -> Result<Json> {
    HP_ASSIGN_OR_RETURN(auto db, storage::OpenStorage(storage_url));
    return Carry(*db, request);
  }();
  if (body.ok()) {
    reply.body = std::move(*body);
  } else {
    reply.code = static_cast<int>(body.status().code());
    reply.message = body.status().message();
  }
  return reply;
}

Result<ControlAnswer> RemoteControl(const std::string& server, const Credentials& credentials,
                                    const ControlRequest& request) {
  HP_ASSIGN_OR_RETURN(Json body, Call(server, credentials,
                                      {RequestOp::kControl, request.study, ControlJson(request)}));
  return AnswerFromJson(body);
}

Result<std::vector<report::StudyCondition>> RemoteConditions(const std::string& server,
                                                             const Credentials& credentials,
                                                             const std::string& study) {
  HP_ASSIGN_OR_RETURN(Json body,
                      Call(server, credentials, {RequestOp::kConditions, study, Json::object()}));
  if (!body.contains("conditions")) return Status::Invalid("reply: no conditions");
  return report::ParseConditionsJson(body["conditions"].dump());
}

Result<report::LogChunk> RemoteLogs(const std::string& server, const Credentials& credentials,
                                    const std::string& study, std::optional<int> trial,
                                    int64_t from) {
  Json q = {{"from", from}};
  if (trial) q["trial"] = *trial;
  HP_ASSIGN_OR_RETURN(Json body, Call(server, credentials, {RequestOp::kLogs, study, q}));
  FrameReader r(body);
  report::LogChunk chunk{r.Field<std::string>("text"), r.Field<int64_t>("next"),
                         r.Field<bool>("over")};
  if (!r.ok()) return r.status();
  return chunk;
}

Result<AskedTrial> RemoteAsk(const std::string& server, const Credentials& credentials,
                             const std::string& study) {
  HP_ASSIGN_OR_RETURN(Json body,
                      Call(server, credentials, {RequestOp::kAsk, study, Json::object()}));
  FrameReader r(body);
  AskedTrial asked;
  asked.number = r.Field<int>("trial");
  asked.params = storage::DecodeParams(r.Field<std::string>("params"));
  if (!r.ok()) return r.status();
  return asked;
}

Status RemoteTell(const std::string& server, const Credentials& credentials,
                  const std::string& study, int number, const Tell& tell) {
  Json q = {{"trial", number}, {"state", storage::TrialStateName(tell.state)}};
  if (tell.value) q["value"] = *tell.value;
  if (tell.step) q["step"] = *tell.step;
  if (!tell.values.empty()) q["values"] = tell.values;
  return Call(server, credentials, {RequestOp::kTell, study, q}).status();
}

Status RemoteHeartbeat(const std::string& server, const Credentials& credentials,
                       const std::string& study, int number) {
  return Call(server, credentials, {RequestOp::kHeartbeat, study, Json{{"trial", number}}})
      .status();
}

}  // namespace hyperpack::scheduler
