#include "protocol.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <utility>

#include "frame_codec.h"
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

namespace {

// Whether `ec`, from a read or a TLS handshake, is the connection ending rather than the peer's
// TLS alert or a failed verification.
bool ClosedUnder(const boost::system::error_code& ec) {
  return ec.category() != asio::error::get_ssl_category() ||
         ec == asio::ssl::error::stream_truncated;
}

}  // namespace

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
  // A TLS alert is the peer's refusal (of this end's certificate, under TLS 1.3 read only here);
  // anything else that ends the stream is a peer gone.
  if (ec && !ClosedUnder(ec)) co_return Status::Invalid("TLS alert: ", ec.message());
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
  // A connection closed under the handshake (the peer went away, or gave up on a slow one) says
  // nothing of whether it would accept this end: a peer may try again.
  if (ec && ClosedUnder(ec))
    co_return Status::Unavailable("the connection closed during the TLS handshake (", ec.message(),
                                  ")");
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

using codec::Custom;
using codec::Field;
using codec::NamedField;
using codec::NameIn;
using codec::Names;
using codec::Rank;
using codec::ReadRank;
using codec::ValueIn;
using codec::WriteRank;

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

// ---- Each frame's fields, once (frame_codec.h)
// ----------------------------------------------------

namespace codec {

template <>
struct FrameFields<Challenge> {
  static constexpr FrameType kType = FrameType::kChallenge;
  static auto Fields() {
    return std::tuple{Field("version", &Challenge::version, 1), Field("nonce", &Challenge::nonce),
                      Field("tls", &Challenge::tls, false)};
  }
};

template <>
struct FrameFields<Hello> {
  static constexpr FrameType kType = FrameType::kHello;
  static auto Fields() {
    // Another version is refused before anything else is read: the rest may differ there.
    auto version = Custom{[](const Hello&, Json& j) { j["version"] = kVersion; },
                          [](FrameReader& r, Hello&) {
                            const int v = r.Optional<int>("version", 0);
                            if (r.ok() && v != kVersion)
                              r.Fail(Status::Invalid("protocol version ", v, " is not ", kVersion));
                          }};
    return std::tuple{version, Field("role", &Hello::role, kRoleNames, "unknown role"),
                      Field("mac", &Hello::mac)};
  }
};

template <>
struct FrameFields<Welcome> {
  static constexpr FrameType kType = FrameType::kWelcome;
  static auto Fields() {
    auto version = Custom{[](const Welcome&, Json& j) { j["version"] = kVersion; },
                          [](FrameReader&, Welcome&) {}};
    return std::tuple{version, Field("heartbeat_timeout_s", &Welcome::heartbeat_timeout_s, 0.0)};
  }
  static void Check(FrameReader& r, const Welcome& w) {
    if (!(w.heartbeat_timeout_s >= 0) || w.heartbeat_timeout_s > 1e6)
      r.Fail(Status::Invalid("'heartbeat_timeout_s' is out of range in a 'welcome' frame"));
  }
};

namespace {
// A reconnecting agent's running ranks: [{"run", "trial", "rank"}...].
void WriteRunning(const Register& reg, Json& j) {
  Json running = Json::array();
  for (const RankRef& ref : reg.running) {
    Json entry = Json::object();
    WriteRank(ref, entry);
    running.push_back(std::move(entry));
  }
  j["running"] = std::move(running);
}

void ReadRunning(FrameReader& r, Register& reg) {
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
    reg.running.push_back(ReadRank(e));
    if (!e.ok()) r.Fail(e.status());
  }
}
}  // namespace

template <>
struct FrameFields<Register> {
  static constexpr FrameType kType = FrameType::kRegister;
  static auto Fields() {
    return std::tuple{
        Field("name", &Register::name),
        Field("gpus", &Register::gpus),
        Field("cpus", &Register::cpus),
        Field("address", &Register::address, ""),
        Custom{WriteRunning, ReadRunning},
        codec::IfNonZero<Register, int64_t>{"gpu_memory_mb", &Register::gpu_memory_mb}};
  }
};

template <>
struct FrameFields<Heartbeat> {
  static constexpr FrameType kType = FrameType::kHeartbeat;
  static auto Fields() { return std::tuple{Field("seq", &Heartbeat::seq, 0)}; }
};

template <>
struct FrameFields<Launch> {
  static constexpr FrameType kType = FrameType::kLaunch;
  static auto Fields() {
    return std::tuple{
        Rank<Launch>{&Launch::ref},
        Field("command", &Launch::command),
        Field("workdir", &Launch::workdir, ""),
        Field("env", &Launch::env),
        codec::IfNotEmpty<Launch, std::vector<std::string>>{"warm_argv", &Launch::warm_argv},
        codec::IfNotEmpty<Launch, std::string>{"lock", &Launch::lock}};
  }
};

template <>
struct FrameFields<Kill> {
  static constexpr FrameType kType = FrameType::kKill;
  static auto Fields() {
    return std::tuple{Rank<Kill>{&Kill::ref}, Field("signal", &Kill::signal)};
  }
};

template <>
struct FrameFields<Line> {
  static constexpr FrameType kType = FrameType::kLine;
  static auto Fields() {
    return std::tuple{Rank<Line>{&Line::ref},
                      Field("stream", &Line::stream, kStreamNames, "a 'line' frame's stream"),
                      Field("text", &Line::text)};
  }
};

template <>
struct FrameFields<Exit> {
  static constexpr FrameType kType = FrameType::kExit;
  static auto Fields() {
    // The rank's end, RankExit: its kind by name ("how") and its code.
    auto how = Custom{[](const Exit& e, Json& j) { j["how"] = NameIn(kExitNames, e.exit.kind); },
                      [](FrameReader& r, Exit& e) {
                        e.exit.kind = NamedField(r, kExitNames, "how", "an 'exit' frame's how");
                      }};
    auto code = Custom{[](const Exit& e, Json& j) { j["code"] = e.exit.code; },
                       [](FrameReader& r, Exit& e) { e.exit.code = r.Field<int>("code"); }};
    return std::tuple{Rank<Exit>{&Exit::ref}, how, code};
  }
};

template <>
struct FrameFields<Submit> {
  static constexpr FrameType kType = FrameType::kSubmit;
  static auto Fields() {
    return std::tuple{Field("study_text", &Submit::study_text),
                      Field("study_path", &Submit::study_path, "study.yaml"),
                      Field("max_trials", &Submit::max_trials),
                      Field("max_parallel", &Submit::max_parallel),
                      Field("submission", &Submit::submission)};
  }
};

template <>
struct FrameFields<Progress> {
  static constexpr FrameType kType = FrameType::kProgress;
  static auto Fields() { return std::tuple{Field("text", &Progress::text, "")}; }
};

template <>
struct FrameFields<Done> {
  static constexpr FrameType kType = FrameType::kDone;
  static auto Fields() {
    return std::tuple{Field("exit_code", &Done::exit_code, 1),
                      Field("message", &Done::message, "")};
  }
};

template <>
struct FrameFields<Request> {
  static constexpr FrameType kType = FrameType::kRequest;
  static auto Fields() {
    return std::tuple{Field("op", &Request::op, kRequestOpNames, "request: unknown op"),
                      Field("study", &Request::study),
                      Field("body", &Request::body, Json::object())};
  }
  static void Check(FrameReader& r, const Request& q) {
    if (!q.body.is_object()) r.Fail(Status::Invalid("request: body is not an object"));
  }
};

template <>
struct FrameFields<Reply> {
  static constexpr FrameType kType = FrameType::kReply;
  static auto Fields() {
    return std::tuple{Field("code", &Reply::code, 0), Field("message", &Reply::message, ""),
                      Field("body", &Reply::body, Json::object())};
  }
};

template <>
struct FrameFields<Accepted> {
  static constexpr FrameType kType = FrameType::kAccepted;
  static auto Fields() { return std::tuple{Field("submission", &Accepted::submission)}; }
};

template <>
struct FrameFields<Cancel> {
  static constexpr FrameType kType = FrameType::kCancel;
  static auto Fields() { return std::tuple{}; }
};

}  // namespace codec

// Every frame struct's ToJson and FromJson: its description's Encode and Decode.
#define HYPERPACK_FRAME_CODEC(S)                          \
  Json S::ToJson() const { return codec::Encode(*this); } \
  Result<S> S::FromJson(const Json& frame) { return codec::Decode<S>(frame); }
HYPERPACK_FRAME_CODEC(Challenge)
HYPERPACK_FRAME_CODEC(Hello)
HYPERPACK_FRAME_CODEC(Welcome)
HYPERPACK_FRAME_CODEC(Register)
HYPERPACK_FRAME_CODEC(Heartbeat)
HYPERPACK_FRAME_CODEC(Launch)
HYPERPACK_FRAME_CODEC(Kill)
HYPERPACK_FRAME_CODEC(Line)
HYPERPACK_FRAME_CODEC(Exit)
HYPERPACK_FRAME_CODEC(Submit)
HYPERPACK_FRAME_CODEC(Progress)
HYPERPACK_FRAME_CODEC(Done)
HYPERPACK_FRAME_CODEC(Request)
HYPERPACK_FRAME_CODEC(Reply)
HYPERPACK_FRAME_CODEC(Accepted)
HYPERPACK_FRAME_CODEC(Cancel)
#undef HYPERPACK_FRAME_CODEC

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

// What a server that closed the connection after this end's hello likely meant, by TLS mode.
const char* AfterHelloClosed(tls::Mode mode) {
  switch (mode) {
    case tls::Mode::kCertificates:
      return "it did not accept this end's certificate (another CA, revoked or expired), or went "
             "away";
    case tls::Mode::kPsk:
      return "it went away, or refused this end's hello (another release?)";
    case tls::Mode::kPlain:
      break;
  }
  return "a wrong token or version, or it went away";
}

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
  // Under TLS 1.3 a server that refuses this end's certificate says so after the handshake: here,
  // by an alert (a refusal) where it sends one. With the token as the TLS key, a wrong one never
  // gets this far.
  if (!welcome.ok())
    co_return Status(welcome.status().code(),
                     StrCat("the server closed the connection (", welcome.status().message(),
                            "): ", AfterHelloClosed(context.mode())));
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

bool GivesUpBeforeAnyWelcome(StatusCode failure, int closed_in_a_row) {
  switch (failure) {
    case StatusCode::kUnavailable:
      return closed_in_a_row >= kClosedHandshakesToGiveUp;
    case StatusCode::kDeadlineExceeded:
      return false;
    default:
      return failure != StatusCode::kOk;
  }
}

}  // namespace hyperpack::scheduler::protocol
