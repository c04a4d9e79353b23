#include "protocol.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <utility>

namespace hyperpack::scheduler::protocol {
namespace {

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
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    *error = "warning: " + path + " is readable by other users; chmod 600 it";
  return token;
}

Json ParseFrame(std::string_view body) {
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw ProtocolError("malformed frame (not a JSON object with a \"type\")");
  return j;
}

std::string EncodeFrame(const Json& message, size_t max_frame) {
  const std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > max_frame)
    throw ProtocolError("a '" + TypeText(message) + "' frame of " + std::to_string(body.size()) +
                        " bytes is over the limit of " + std::to_string(max_frame));
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
  auto ep = socket_.local_endpoint(ec);
  return ec ? "127.0.0.1" : ep.address().to_string();
}

asio::awaitable<Json> Connection::Receive() {
  unsigned char header[4];
  boost::system::error_code ec;
  co_await asio::async_read(socket_, asio::buffer(header),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) throw ProtocolError(ec == asio::error::eof ? "closed by the peer" : ec.message());
  uint32_t n = (uint32_t(header[0]) << 24) | (uint32_t(header[1]) << 16) |
               (uint32_t(header[2]) << 8) | uint32_t(header[3]);
  if (n > max_frame_)
    throw ProtocolError("oversized frame (" + std::to_string(n) + " bytes; at most " +
                        std::to_string(max_frame_) + ")");
  std::string body(n, '\0');
  co_await asio::async_read(socket_, asio::buffer(body),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) throw ProtocolError("truncated frame: " + ec.message());
  co_return ParseFrame(body);
}

void Connection::Send(const Json& message) {
  std::string frame;
  try {
    frame = EncodeFrame(message, max_frame_);
  } catch (const std::exception&) {
    Close();
    return;
  }
  outgoing_.push_back(std::move(frame));
  if (!writing_) WriteNext();
}

void Connection::WriteNext() {
  if (outgoing_.empty() || !socket_.is_open()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  auto self = shared_from_this();
  asio::async_write(socket_, asio::buffer(outgoing_.front()),
                    [self](boost::system::error_code ec, size_t) {
                      self->outgoing_.pop_front();
                      if (ec) {
                        self->outgoing_.clear();
                        self->writing_ = false;
                        return;
                      }
                      self->WriteNext();
                    });
}

void Connection::Close() {
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
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
};
constexpr Names<Role> kRoleNames[] = {{Role::kAgent, "agent"}, {Role::kClient, "client"}};
constexpr Names<Stream> kStreamNames[] = {{Stream::kOut, "out"}, {Stream::kErr, "err"}};
constexpr Names<RankExit::Kind> kExitNames[] = {
    {RankExit::Kind::kExited, "exited"},
    {RankExit::Kind::kSignaled, "signaled"},
    {RankExit::Kind::kLost, "lost"},
    {RankExit::Kind::kNeverStarted, "never_started"},
    {RankExit::Kind::kTimedOut, "timed_out"},
    {RankExit::Kind::kPreempted, "preempted"},
    {RankExit::Kind::kRefused, "refused"},
};

template <typename E, size_t N>
const char* NameIn(const Names<E> (&names)[N], E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";  // unreachable: every table lists every value
}

// The value named `name`, or ProtocolError saying where and what was allowed.
template <typename E, size_t N>
E ValueIn(const Names<E> (&names)[N], const std::string& name, const std::string& what) {
  std::string allowed;
  for (const auto& [v, n] : names) {
    if (name == n) return v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  }
  throw ProtocolError(what + " '" + name + "'; expected one of " + allowed);
}

// A frame of `type` with nothing else yet.
Json Frame(FrameType type) { return {{"type", FrameTypeName(type)}}; }

// Throws unless `frame` is of `type`: decoding one type as another is a bug, and the error should
// say so rather than name whichever field happens to be missing.
void Expect(const Json& frame, FrameType type) {
  if (TypeOf(frame) != type)
    throw ProtocolError(std::string("expected a '") + FrameTypeName(type) + "' frame, not a '" +
                        TypeText(frame) + "' one");
}

Json WithRank(FrameType type, const RankRef& ref) {
  Json j = Frame(type);
  j["run"] = ref.run;
  j["trial"] = ref.id.trial;
  j["rank"] = ref.id.rank;
  return j;
}

RankRef RankOf(const Json& frame) {
  return {OptionalField<int64_t>(frame, "run", 0),
          {Field<int>(frame, "trial"), Field<int>(frame, "rank")}};
}

}  // namespace

const char* FrameTypeName(FrameType type) { return NameIn(kFrameTypeNames, type); }

const char* RoleName(Role role) { return NameIn(kRoleNames, role); }

std::string TypeText(const Json& message) {
  auto it = message.is_object() ? message.find("type") : message.end();
  return it != message.end() && it->is_string() ? it->get<std::string>() : "?";
}

FrameType TypeOf(const Json& frame) {
  if (!frame.is_object() || !frame.contains("type"))
    throw ProtocolError("a frame without a 'type'");
  if (!frame["type"].is_string()) throw ProtocolError("'type' is not a string in a frame");
  return ValueIn(kFrameTypeNames, frame["type"].get<std::string>(), "unknown frame type");
}

Json Challenge::ToJson() const {
  Json j = Frame(FrameType::kChallenge);
  j["version"] = kVersion;
  j["nonce"] = nonce;
  return j;
}

Challenge Challenge::FromJson(const Json& frame) {
  Expect(frame, FrameType::kChallenge);
  return {Field<std::string>(frame, "nonce")};
}

Json Hello::ToJson() const {
  Json j = Frame(FrameType::kHello);
  j["version"] = kVersion;
  j["role"] = RoleName(role);
  j["mac"] = mac;
  return j;
}

Hello Hello::FromJson(const Json& frame) {
  Expect(frame, FrameType::kHello);
  const int version = OptionalField<int>(frame, "version", 0);
  if (version != kVersion)
    throw ProtocolError("protocol version " + std::to_string(version) + " is not " +
                        std::to_string(kVersion));
  Hello h;
  h.role = ValueIn(kRoleNames, Field<std::string>(frame, "role"), "unknown role");
  h.mac = Field<std::string>(frame, "mac");
  return h;
}

Json Welcome::ToJson() const {
  Json j = Frame(FrameType::kWelcome);
  j["version"] = kVersion;
  j["heartbeat_timeout_s"] = heartbeat_timeout_s;
  return j;
}

Welcome Welcome::FromJson(const Json& frame) {
  Expect(frame, FrameType::kWelcome);
  Welcome w;
  w.heartbeat_timeout_s = OptionalField<double>(frame, "heartbeat_timeout_s", 0.0);
  if (!(w.heartbeat_timeout_s >= 0) || w.heartbeat_timeout_s > 1e6)
    throw ProtocolError("'heartbeat_timeout_s' is out of range in a 'welcome' frame");
  return w;
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

Register Register::FromJson(const Json& frame) {
  Expect(frame, FrameType::kRegister);
  Register r;
  r.name = Field<std::string>(frame, "name");
  r.gpus = Field<std::vector<std::string>>(frame, "gpus");
  r.cpus = Field<int>(frame, "cpus");
  r.address = OptionalField<std::string>(frame, "address", "");
  const Json running = OptionalField<Json>(frame, "running", Json::array());
  if (!running.is_array()) throw ProtocolError("'running' is not a list in a 'register' frame");
  for (const Json& entry : running) {
    if (!entry.is_object()) throw ProtocolError("a 'running' entry is not an object");
    r.running.push_back(RankOf(entry));
  }
  return r;
}

Json Heartbeat::ToJson() const {
  Json j = Frame(FrameType::kHeartbeat);
  j["seq"] = seq;
  return j;
}

Heartbeat Heartbeat::FromJson(const Json& frame) {
  Expect(frame, FrameType::kHeartbeat);
  return {OptionalField<int64_t>(frame, "seq", 0)};
}

Json Launch::ToJson() const {
  Json j = WithRank(FrameType::kLaunch, ref);
  j["command"] = command;
  j["workdir"] = workdir;
  j["env"] = env;
  if (!warm_argv.empty()) j["warm_argv"] = warm_argv;
  return j;
}

Launch Launch::FromJson(const Json& frame) {
  Expect(frame, FrameType::kLaunch);
  Launch l;
  l.ref = RankOf(frame);
  l.command = Field<std::string>(frame, "command");
  l.workdir = OptionalField<std::string>(frame, "workdir", "");
  l.env = Field<std::vector<std::string>>(frame, "env");
  l.warm_argv = OptionalField<std::vector<std::string>>(frame, "warm_argv", {});
  return l;
}

Json Kill::ToJson() const {
  Json j = WithRank(FrameType::kKill, ref);
  j["signal"] = signal;
  return j;
}

Kill Kill::FromJson(const Json& frame) {
  Expect(frame, FrameType::kKill);
  return {RankOf(frame), Field<int>(frame, "signal")};
}

Json Line::ToJson() const {
  Json j = WithRank(FrameType::kLine, ref);
  j["stream"] = NameIn(kStreamNames, stream);
  j["text"] = text;
  return j;
}

Line Line::FromJson(const Json& frame) {
  Expect(frame, FrameType::kLine);
  Line l;
  l.ref = RankOf(frame);
  l.stream = ValueIn(kStreamNames, Field<std::string>(frame, "stream"), "a 'line' frame's stream");
  l.text = Field<std::string>(frame, "text");
  return l;
}

Json Exit::ToJson() const {
  Json j = WithRank(FrameType::kExit, ref);
  j["how"] = NameIn(kExitNames, exit.kind);
  j["code"] = exit.code;
  return j;
}

Exit Exit::FromJson(const Json& frame) {
  Expect(frame, FrameType::kExit);
  Exit e;
  e.ref = RankOf(frame);
  e.exit.kind = ValueIn(kExitNames, Field<std::string>(frame, "how"), "an 'exit' frame's how");
  e.exit.code = Field<int>(frame, "code");
  return e;
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

Submit Submit::FromJson(const Json& frame) {
  Expect(frame, FrameType::kSubmit);
  Submit s;
  s.study_text = Field<std::string>(frame, "study_text");
  s.study_path = OptionalField<std::string>(frame, "study_path", "study.yaml");
  if (frame.contains("max_trials")) s.max_trials = Field<int>(frame, "max_trials");
  if (frame.contains("max_parallel")) s.max_parallel = Field<int>(frame, "max_parallel");
  if (frame.contains("submission")) s.submission = Field<int64_t>(frame, "submission");
  return s;
}

Json Progress::ToJson() const {
  Json j = Frame(FrameType::kProgress);
  j["text"] = text;
  return j;
}

Progress Progress::FromJson(const Json& frame) {
  Expect(frame, FrameType::kProgress);
  return {OptionalField<std::string>(frame, "text", "")};
}

Json Done::ToJson() const {
  Json j = Frame(FrameType::kDone);
  j["exit_code"] = exit_code;
  j["message"] = message;
  return j;
}

Done Done::FromJson(const Json& frame) {
  Expect(frame, FrameType::kDone);
  return {OptionalField<int>(frame, "exit_code", 1),
          OptionalField<std::string>(frame, "message", "")};
}

Json Accepted::ToJson() const {
  Json j = Frame(FrameType::kAccepted);
  j["submission"] = submission;
  return j;
}

Accepted Accepted::FromJson(const Json& frame) {
  Expect(frame, FrameType::kAccepted);
  return {Field<int64_t>(frame, "submission")};
}

Json Cancel::ToJson() const { return Frame(FrameType::kCancel); }

Cancel Cancel::FromJson(const Json& frame) {
  Expect(frame, FrameType::kCancel);
  return {};
}

asio::awaitable<Role> ServerHandshake(Connection& c, const std::string& token,
                                      double heartbeat_timeout_s) {
  const std::string nonce = RandomHex(32);
  c.Send(Challenge{nonce}.ToJson());
  const Json frame = co_await c.Receive();
  if (TypeOf(frame) != FrameType::kHello) throw ProtocolError("expected a hello frame first");
  const Hello hello = Hello::FromJson(frame);
  if (!SameSecret(hello.mac, Hmac(token, nonce + RoleName(hello.role))))
    throw ProtocolError("authentication failed: wrong token");
  c.Send(Welcome{heartbeat_timeout_s}.ToJson());
  co_return hello.role;
}

asio::awaitable<Welcome> ClientHandshake(Connection& c, const std::string& token, Role role) {
  const Json challenge = co_await c.Receive();
  if (TypeOf(challenge) != FrameType::kChallenge)
    throw ProtocolError("expected a challenge from the server");
  const std::string nonce = Challenge::FromJson(challenge).nonce;
  c.Send(Hello{role, Hmac(token, nonce + RoleName(role))}.ToJson());
  Json welcome;
  try {
    welcome = co_await c.Receive();
  } catch (const ProtocolError&) {
    throw ProtocolError("the server closed the connection: wrong token or version");
  }
  if (TypeOf(welcome) != FrameType::kWelcome) throw ProtocolError("the server did not welcome us");
  co_return Welcome::FromJson(welcome);
}

}  // namespace hyperpack::scheduler::protocol
