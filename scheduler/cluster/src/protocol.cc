#include "protocol.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <utility>

#include "hyperpack/net/tls_files.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler::protocol {
namespace {

// HP_RETURN_IF_ERROR for coroutines.
#define HP_CO_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::hyperpack::Status hp_co_status_ = (expr);       \
    if (!hp_co_status_.ok()) co_return hp_co_status_; \
  } while (0)

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

}  // namespace

std::string ErrorText(const std::exception& e) {
  if (auto* system = dynamic_cast<const boost::system::system_error*>(&e))
    return system->code().message();
  return e.what();
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &len);
  return Hex(mac, len);
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("OpenSSL could not produce random bytes");
  return Hex(reinterpret_cast<const unsigned char*>(raw.data()), bytes);
}

bool SameSecret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string ReadTokenFile(const std::string& path, std::string* error) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {
    *error = "cannot read the token file " + path;
    return "";
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 16) {
    *error = path + ": the token must be at least 16 characters";
    return "";
  }
  if (Status s = net::CheckPrivate(path, "token file"); !s.ok()) {
    *error = s.message();
    return "";
  }
  return token;
}

Result<Json> ParseFrame(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Status::Invalid("malformed frame (not a JSON object with a \"type\")");
  return j;
}

Result<std::string> EncodeFrame(const Json& message, size_t max_frame) {
  const std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > max_frame)
    return Status::Invalid("a '", TypeText(message), "' frame of ", body.size(),
                           " bytes is over the limit of ", max_frame);
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string frame(4, '\0');
  frame[0] = static_cast<char>(n >> 24);
  frame[1] = static_cast<char>(n >> 16);
  frame[2] = static_cast<char>(n >> 8);
  frame[3] = static_cast<char>(n);
  return frame + body;
}

Connection::Connection(tcp::socket socket, size_t max_frame)
    : socket_(std::move(socket)), max_frame_(max_frame) {
  boost::system::error_code ec;
  // Frames are small and often come in pairs (a rank's last line, then its exit): without this,
  // Nagle's algorithm holds the second until the first is acknowledged, ~30 ms a trial.
  socket_.set_option(tcp::no_delay(true), ec);
  auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

std::string Connection::local_address() const {
  boost::system::error_code ec;
  auto ep = Socket().local_endpoint(ec);
  return ec ? "127.0.0.1" : ep.address().to_string();
}

asio::awaitable<boost::system::error_code> Connection::ReadExactly(asio::mutable_buffer buffer) {
  boost::system::error_code ec;
  if (tls_)
    co_await asio::async_read(*tls_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  else
    co_await asio::async_read(socket_, buffer, asio::redirect_error(asio::use_awaitable, ec));
  co_return ec;
}

asio::awaitable<Result<Json>> Connection::Receive() {
  unsigned char header[4];
  boost::system::error_code ec = co_await ReadExactly(asio::buffer(header));
  if (ec)
    co_return Status::Unavailable(ec == asio::error::eof ? "closed by the peer" : ec.message());
  uint32_t n = (uint32_t(header[0]) << 24) | (uint32_t(header[1]) << 16) |
               (uint32_t(header[2]) << 8) | uint32_t(header[3]);
  if (n > max_frame_)
    co_return Status::Invalid("oversized frame (", n, " bytes; at most ", max_frame_, ")");
  std::string body(n, '\0');
  ec = co_await ReadExactly(asio::buffer(body));
  if (ec) co_return Status::Unavailable("truncated frame: ", ec.message());
  co_return ParseFrame(body);
}

asio::awaitable<Status> Connection::SendFirst(const Json& message) {
  Result<std::string> frame = EncodeFrame(message, max_frame_);
  if (!frame.ok()) co_return frame.status();
  boost::system::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(*frame),
                             asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::Unavailable(ec.message());
  co_return Status::Ok();
}

asio::awaitable<Status> Connection::StartTls(tls::TlsContext& context, const std::string& host) {
  const bool server = context.end() == tls::End::kServer;
  boost::system::error_code ec;
  if (server) {
    // A TLS connection opens with a handshake record (content type 22); an older or plaintext
    // peer's first frame opens with its length's high byte, 0.
    unsigned char first = 0;
    co_await socket_.async_receive(asio::buffer(&first, 1), tcp::socket::message_peek,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
      co_return Status::Unavailable(ec == asio::error::eof ? "closed by the peer" : ec.message());
    if (first != 22)
      co_return Status::Invalid(
          "the peer sent plaintext where TLS was due: a hyperpack older than protocol 2, or one "
          "run with --insecure (run every end with the same release and TLS settings)");
  }
  tls_ = std::make_unique<asio::ssl::stream<tcp::socket>>(std::move(socket_), *context.ssl());
  if (!server && context.mode() == tls::Mode::kCertificates) {
    SSL_set_tlsext_host_name(tls_->native_handle(), host.c_str());
    tls_->set_verify_callback(asio::ssl::host_name_verification(host));
  }
  co_await tls_->async_handshake(
      server ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
      asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    // OpenSSL's error says only that verification failed; the verify result says why.
    std::string reason = ec.message();
    const long verified = SSL_get_verify_result(tls_->native_handle());
    if (verified != X509_V_OK)
      reason += std::string(": ") + X509_verify_cert_error_string(verified);
    co_return Status::Invalid(tls::HandshakeError(reason, context.mode()));
  }
  co_return Status::Ok();
}

void Connection::Send(const Json& message) {
  Result<std::string> frame = EncodeFrame(message, max_frame_);
  if (!frame.ok()) {
    Close();
    return;
  }
  outgoing_.push_back(std::move(frame).value());
  if (!writing_) WriteNext();
}

void Connection::WriteNext() {
  if (outgoing_.empty() || !Socket().is_open()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  auto done = [self](boost::system::error_code ec, size_t) {
    self->outgoing_.pop_front();
    if (ec) {
      self->outgoing_.clear();
      self->writing_ = false;
      return;
    }
    self->WriteNext();
  };
  if (tls_)
    asio::async_write(*tls_, asio::buffer(outgoing_.front()), done);
  else
    asio::async_write(socket_, asio::buffer(outgoing_.front()), done);
}

void Connection::Close() {
  boost::system::error_code ignored;
  Socket().shutdown(tcp::socket::shutdown_both, ignored);
  Socket().close(ignored);
}

namespace {

// A name on the wire for each value of an enum.
template <typename E>
using Names = std::pair<E, const char*>;

constexpr Names<FrameType> kFrameTypeNames[] = {
    {FrameType::kChallenge, "challenge"}, {FrameType::kHello, "hello"},
    {FrameType::kWelcome, "welcome"},     {FrameType::kRegister, "register"},
    {FrameType::kHeartbeat, "heartbeat"}, {FrameType::kLaunch, "launch"},
    {FrameType::kKill, "kill"},           {FrameType::kLine, "line"},
    {FrameType::kExit, "exit"},           {FrameType::kSubmit, "submit"},
    {FrameType::kProgress, "progress"},   {FrameType::kDone, "done"},
    {FrameType::kAccepted, "accepted"},   {FrameType::kCancel, "cancel"},
    {FrameType::kRequest, "request"},     {FrameType::kReply, "reply"},
};
constexpr Names<RequestOp> kRequestOpNames[] = {
    {RequestOp::kControl, "control"}, {RequestOp::kConditions, "conditions"},
    {RequestOp::kLogs, "logs"},       {RequestOp::kAsk, "ask"},
    {RequestOp::kTell, "tell"},       {RequestOp::kHeartbeat, "heartbeat"},
};
constexpr Names<Role> kRoleNames[] = {{Role::kAgent, "agent"}, {Role::kClient, "client"}};
constexpr Names<Stream> kStreamNames[] = {{Stream::kOut, "out"}, {Stream::kErr, "err"}};
constexpr Names<RankExit::Kind> kExitNames[] = {
    {RankExit::Kind::kExited, "exited"},      {RankExit::Kind::kSignaled, "signaled"},
    {RankExit::Kind::kLost, "lost"},          {RankExit::Kind::kNeverStarted, "never_started"},
    {RankExit::Kind::kTimedOut, "timed_out"}, {RankExit::Kind::kPreempted, "preempted"},
    {RankExit::Kind::kRefused, "refused"},
};

template <typename E, size_t N>
const char* NameIn(const Names<E> (&names)[N], E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";  // unreachable: every table lists every value
}

// The value named `name`, or an error saying where and what was allowed.
template <typename E, size_t N>
Result<E> ValueIn(const Names<E> (&names)[N], const std::string& name, const std::string& what) {
  std::string allowed;
  for (const auto& [v, n] : names) {
    if (name == n) return v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  }
  return Status::Invalid(what, " '", name, "'; expected one of ", allowed);
}

// The value named by field `key` of the frame `r` reads; the first value after an error.
template <typename E, size_t N>
E NamedField(FrameReader& r, const Names<E> (&names)[N], const char* key, const std::string& what) {
  const std::string name = r.Field<std::string>(key);
  if (!r.ok()) return names[0].first;
  Result<E> value = ValueIn(names, name, what);
  if (value.ok()) return *value;
  r.Fail(value.status());
  return names[0].first;
}

// A frame of `type` with nothing else yet.
Json Frame(FrameType type) { return {{"type", FrameTypeName(type)}}; }

Json WithRank(FrameType type, const RankRef& ref) {
  Json j = Frame(type);
  j["run"] = ref.run;
  j["trial"] = ref.id.trial;
  j["rank"] = ref.id.rank;
  return j;
}

// Braced initialisers run left to right: the fields are read in this order.
RankRef RankOf(FrameReader& r) {
  return {r.Optional<int64_t>("run", 0), {r.Field<int>("trial"), r.Field<int>("rank")}};
}

}  // namespace

const char* FrameTypeName(FrameType type) { return NameIn(kFrameTypeNames, type); }

const char* RoleName(Role role) { return NameIn(kRoleNames, role); }

std::string TypeText(const Json& message) {
  auto it = message.is_object() ? message.find("type") : message.end();
  return it != message.end() && it->is_string() ? it->get<std::string>() : "?";
}

Result<FrameType> TypeOf(const Json& frame) {
  if (!frame.is_object() || !frame.contains("type"))
    return Status::Invalid("a frame without a 'type'");
  if (!frame["type"].is_string()) return Status::Invalid("'type' is not a string in a frame");
  return ValueIn(kFrameTypeNames, frame["type"].get<std::string>(), "unknown frame type");
}

FrameReader::FrameReader(const Json& frame, FrameType type) : frame_(frame) {
  Result<FrameType> actual = TypeOf(frame);
  if (!actual.ok()) {
    Fail(actual.status());
  } else if (*actual != type) {
    Fail(Status::Invalid("expected a '", FrameTypeName(type), "' frame, not a '", TypeText(frame),
                         "' one"));
  }
}

Json Challenge::ToJson() const {
  Json j = Frame(FrameType::kChallenge);
  j["version"] = version;
  j["nonce"] = nonce;
  j["tls"] = tls;
  return j;
}

Result<Challenge> Challenge::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kChallenge);
  Challenge c;
  c.version = r.Optional<int>("version", 1);
  c.nonce = r.Field<std::string>("nonce");
  c.tls = r.Optional<bool>("tls", false);
  return r.Finish(std::move(c));
}

Json Hello::ToJson() const {
  Json j = Frame(FrameType::kHello);
  j["version"] = kVersion;
  j["role"] = RoleName(role);
  j["mac"] = mac;
  return j;
}

Result<Hello> Hello::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kHello);
  const int version = r.Optional<int>("version", 0);
  if (r.ok() && version != kVersion)
    r.Fail(Status::Invalid("protocol version ", version, " is not ", kVersion));
  Hello h;
  h.role = NamedField(r, kRoleNames, "role", "unknown role");
  h.mac = r.Field<std::string>("mac");
  return r.Finish(std::move(h));
}

Json Welcome::ToJson() const {
  Json j = Frame(FrameType::kWelcome);
  j["version"] = kVersion;
  j["heartbeat_timeout_s"] = heartbeat_timeout_s;
  return j;
}

Result<Welcome> Welcome::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kWelcome);
  Welcome w;
  w.heartbeat_timeout_s = r.Optional<double>("heartbeat_timeout_s", 0.0);
  if (r.ok() && (!(w.heartbeat_timeout_s >= 0) || w.heartbeat_timeout_s > 1e6))
    r.Fail(Status::Invalid("'heartbeat_timeout_s' is out of range in a 'welcome' frame"));
  return r.Finish(w);
}

Json Register::ToJson() const {
  Json j = Frame(FrameType::kRegister);
  j["name"] = name;
  j["gpus"] = gpus;
  j["cpus"] = cpus;
  j["address"] = address;
  Json running_json = Json::array();
  for (const RankRef& r : running)
    running_json.push_back({{"run", r.run}, {"trial", r.id.trial}, {"rank", r.id.rank}});
  j["running"] = std::move(running_json);
  return j;
}

Result<Register> Register::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kRegister);
  Register reg;
  reg.name = r.Field<std::string>("name");
  reg.gpus = r.Field<std::vector<std::string>>("gpus");
  reg.cpus = r.Field<int>("cpus");
  reg.address = r.Optional<std::string>("address", "");
  const Json running = r.Optional<Json>("running", Json::array());
  if (r.ok() && !running.is_array())
    r.Fail(Status::Invalid("'running' is not a list in a 'register' frame"));
  for (const Json& entry : running) {
    if (!r.ok()) break;
    if (!entry.is_object()) {
      r.Fail(Status::Invalid("a 'running' entry is not an object"));
      break;
    }
    FrameReader e(entry);
    reg.running.push_back(RankOf(e));
    if (!e.ok()) r.Fail(e.status());
  }
  return r.Finish(std::move(reg));
}

Json Heartbeat::ToJson() const {
  Json j = Frame(FrameType::kHeartbeat);
  j["seq"] = seq;
  return j;
}

Result<Heartbeat> Heartbeat::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kHeartbeat);
  return r.Finish(Heartbeat{r.Optional<int64_t>("seq", 0)});
}

Json Launch::ToJson() const {
  Json j = WithRank(FrameType::kLaunch, ref);
  j["command"] = command;
  j["workdir"] = workdir;
  j["env"] = env;
  if (!warm_argv.empty()) j["warm_argv"] = warm_argv;
  return j;
}

Result<Launch> Launch::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kLaunch);
  Launch l;
  l.ref = RankOf(r);
  l.command = r.Field<std::string>("command");
  l.workdir = r.Optional<std::string>("workdir", "");
  l.env = r.Field<std::vector<std::string>>("env");
  l.warm_argv = r.Optional<std::vector<std::string>>("warm_argv", {});
  return r.Finish(std::move(l));
}

Json Kill::ToJson() const {
  Json j = WithRank(FrameType::kKill, ref);
  j["signal"] = signal;
  return j;
}

Result<Kill> Kill::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kKill);
  return r.Finish(Kill{RankOf(r), r.Field<int>("signal")});
}

Json Line::ToJson() const {
  Json j = WithRank(FrameType::kLine, ref);
  j["stream"] = NameIn(kStreamNames, stream);
  j["text"] = text;
  return j;
}

Result<Line> Line::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kLine);
  Line l;
  l.ref = RankOf(r);
  l.stream = NamedField(r, kStreamNames, "stream", "a 'line' frame's stream");
  l.text = r.Field<std::string>("text");
  return r.Finish(std::move(l));
}

Json Exit::ToJson() const {
  Json j = WithRank(FrameType::kExit, ref);
  j["how"] = NameIn(kExitNames, exit.kind);
  j["code"] = exit.code;
  return j;
}

Result<Exit> Exit::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kExit);
  Exit e;
  e.ref = RankOf(r);
  e.exit.kind = NamedField(r, kExitNames, "how", "an 'exit' frame's how");
  e.exit.code = r.Field<int>("code");
  return r.Finish(e);
}

Json Submit::ToJson() const {
  Json j = Frame(FrameType::kSubmit);
  j["study_text"] = study_text;
  j["study_path"] = study_path;
  if (max_trials) j["max_trials"] = *max_trials;
  if (max_parallel) j["max_parallel"] = *max_parallel;
  if (submission) j["submission"] = *submission;
  return j;
}

Result<Submit> Submit::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kSubmit);
  Submit s;
  s.study_text = r.Field<std::string>("study_text");
  s.study_path = r.Optional<std::string>("study_path", "study.yaml");
  if (r.Has("max_trials")) s.max_trials = r.Field<int>("max_trials");
  if (r.Has("max_parallel")) s.max_parallel = r.Field<int>("max_parallel");
  if (r.Has("submission")) s.submission = r.Field<int64_t>("submission");
  return r.Finish(std::move(s));
}

Json Progress::ToJson() const {
  Json j = Frame(FrameType::kProgress);
  j["text"] = text;
  return j;
}

Result<Progress> Progress::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kProgress);
  return r.Finish(Progress{r.Optional<std::string>("text", "")});
}

Json Done::ToJson() const {
  Json j = Frame(FrameType::kDone);
  j["exit_code"] = exit_code;
  j["message"] = message;
  return j;
}

Result<Done> Done::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kDone);
  return r.Finish(Done{r.Optional<int>("exit_code", 1), r.Optional<std::string>("message", "")});
}

Json Request::ToJson() const {
  Json j = Frame(FrameType::kRequest);
  for (const auto& [o, name] : kRequestOpNames)
    if (o == op) j["op"] = name;
  j["study"] = study;
  j["body"] = body;
  return j;
}

Result<Request> Request::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kRequest);
  Request out;
  const std::string op = r.Field<std::string>("op");
  out.study = r.Field<std::string>("study");
  if (r.Has("body")) out.body = r.Field<Json>("body");
  if (!out.body.is_object()) r.Fail(Status::Invalid("request: body is not an object"));
  bool known = false;
  for (const auto& [o, name] : kRequestOpNames)
    if (op == name) {
      out.op = o;
      known = true;
    }
  if (r.ok() && !known) r.Fail(Status::Invalid("request: unknown op '", op, "'"));
  return r.Finish(std::move(out));
}

Json Reply::ToJson() const {
  Json j = Frame(FrameType::kReply);
  j["code"] = code;
  j["message"] = message;
  j["body"] = body;
  return j;
}

Result<Reply> Reply::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kReply);
  Reply out;
  out.code = r.Optional<int>("code", 0);
  out.message = r.Optional<std::string>("message", "");
  if (r.Has("body")) out.body = r.Field<Json>("body");
  return r.Finish(std::move(out));
}

Json Accepted::ToJson() const {
  Json j = Frame(FrameType::kAccepted);
  j["submission"] = submission;
  return j;
}

Result<Accepted> Accepted::FromJson(const Json& frame) {
  FrameReader r(frame, FrameType::kAccepted);
  return r.Finish(Accepted{r.Field<int64_t>("submission")});
}

Json Cancel::ToJson() const { return Frame(FrameType::kCancel); }

Result<Cancel> Cancel::FromJson(const Json& frame) {
  return FrameReader(frame, FrameType::kCancel).Finish(Cancel{});
}

// Whether a handshake ended, and whether its deadline came first. Outside the anonymous
// namespace: a coroutine's frame that holds a type from there draws GCC's -Wsubobject-linkage.
struct HandshakeWatch {
  bool done = false, expired = false;
};

// The handshakes' deadline: runs `step` (a handshake on `c`), closing `c` under it when `timeout_s`
// passes first (when a shared_ptr owns `c`), which ends it; the result is then `late`.
template <typename T>
asio::awaitable<Result<T>> WithDeadline(Connection& c, double timeout_s,
                                        asio::awaitable<Result<T>> step, std::string late) {
  auto watch = std::make_shared<HandshakeWatch>();
  asio::steady_timer deadline(co_await asio::this_coro::executor,
                              std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  deadline.async_wait([weak = c.weak_from_this(), watch](boost::system::error_code e) {
    if (e || watch->done) return;
    watch->expired = true;
    if (auto conn = weak.lock()) conn->Close();
  });
  Result<T> out = co_await std::move(step);
  watch->done = true;
  deadline.cancel();
  if (watch->expired && !out.ok()) co_return Status::DeadlineExceeded(late);
  co_return out;
}

namespace {

// ServerHandshake without its deadline.
asio::awaitable<Result<Role>> Admit(Connection& c, tls::TlsContext& context,
                                    const std::string& token, double heartbeat_timeout_s) {
  Challenge challenge;
  challenge.nonce = RandomHex(32);
  challenge.tls = context.mode() != tls::Mode::kPlain;
  HP_CO_RETURN_IF_ERROR(co_await c.SendFirst(challenge.ToJson()));
  if (challenge.tls) HP_CO_RETURN_IF_ERROR(co_await c.StartTls(context, ""));
  Result<Json> frame = co_await c.Receive();
  if (!frame.ok()) co_return frame.status();
  Result<FrameType> frame_type = TypeOf(*frame);
  if (!frame_type.ok()) co_return frame_type.status();
  if (*frame_type != FrameType::kHello) co_return Status::Invalid("expected a hello frame first");
  Result<Hello> hello = Hello::FromJson(*frame);
  if (!hello.ok()) co_return hello.status();
  if (!SameSecret(hello->mac, Hmac(token, challenge.nonce + RoleName(hello->role))))
    co_return Status::Invalid("authentication failed: wrong token");
  c.Send(Welcome{heartbeat_timeout_s}.ToJson());
  co_return hello->role;
}

}  // namespace

asio::awaitable<Result<Role>> ServerHandshake(Connection& c, tls::TlsContext& context,
                                              const std::string& token, double heartbeat_timeout_s,
                                              double timeout_s) {
  // A peer that says nothing, or too little, holds no session open for long.
  co_return co_await WithDeadline(
      c, timeout_s, Admit(c, context, token, heartbeat_timeout_s),
      StrCat("no hello within ", FormatDuration(timeout_s), " of connecting"));
}

namespace {

// Why a peer with `context` will not go on after `challenge`, or OK.
Status AgreeWith(const Challenge& challenge, const tls::TlsContext& context) {
  if (challenge.version != kVersion)
    return Status::Invalid("the server speaks protocol ", challenge.version, ", this hyperpack ",
                           kVersion, ": run the same release on every machine");
  const bool tls = context.mode() != tls::Mode::kPlain;
  if (challenge.tls && !tls)
    return Status::Invalid("the server requires TLS: leave out --insecure here");
  if (!challenge.tls && tls)
    return Status::Invalid(
        "the server offers no TLS (it was started with --insecure): refused, as this end did not "
        "choose plaintext; start the server without --insecure, or pass --insecure here too on a "
        "network you trust");
  return Status::Ok();
}

}  // namespace

// ClientHandshake without its deadline.
asio::awaitable<Result<Welcome>> Greet(Connection& c, tls::TlsContext& context,
                                       const std::string& host, const std::string& token,
                                       Role role) {
  Result<Json> first = co_await c.Receive();
  if (!first.ok()) co_return first.status();
  Result<FrameType> first_type = TypeOf(*first);
  if (!first_type.ok()) co_return first_type.status();
  if (*first_type != FrameType::kChallenge)
    co_return Status::Invalid("expected a challenge from the server");
  Result<Challenge> challenge = Challenge::FromJson(*first);
  if (!challenge.ok()) co_return challenge.status();
  HP_CO_RETURN_IF_ERROR(AgreeWith(*challenge, context));
  if (challenge->tls) HP_CO_RETURN_IF_ERROR(co_await c.StartTls(context, host));
  c.Send(Hello{role, Hmac(token, challenge->nonce + RoleName(role))}.ToJson());
  Result<Json> welcome = co_await c.Receive();
  // Under TLS 1.3 a server that refuses this end's certificate says so after the handshake: here.
  if (!welcome.ok())
    co_return Status::Unavailable(
        "the server closed the connection (", welcome.status().message(), "): ",
        context.mode() == tls::Mode::kCertificates
            ? "it did not accept this end's certificate (another CA, revoked or expired)"
            : "a wrong token or version");
  Result<FrameType> welcome_type = TypeOf(*welcome);
  if (!welcome_type.ok()) co_return welcome_type.status();
  if (*welcome_type != FrameType::kWelcome)
    co_return Status::Invalid("the server did not welcome us");
  co_return Welcome::FromJson(*welcome);
}

asio::awaitable<Result<Welcome>> ClientHandshake(Connection& c, tls::TlsContext& context,
                                                 const std::string& host, const std::string& token,
                                                 Role role, double timeout_s) {
  // A server (or whatever answers at its address) that says nothing, or too little, holds no
  // client for long.
  co_return co_await WithDeadline(
      c, timeout_s, Greet(c, context, host, token, role),
      StrCat("no handshake with the server within ", FormatDuration(timeout_s),
             " of connecting: is it a hyperpack server, of this release?"));
}

}  // namespace hyperpack::scheduler::protocol
