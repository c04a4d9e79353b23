#include "protocol.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>

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

Connection::Connection(tcp::socket socket, size_t max_frame)
    : socket_(std::move(socket)), max_frame_(max_frame) {
  boost::system::error_code ec;
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
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw ProtocolError("malformed frame (not a JSON object with a \"type\")");
  co_return j;
}

void Connection::Send(const Json& message) {
  std::string body = message.dump();
  std::string frame(4, '\0');
  uint32_t n = static_cast<uint32_t>(body.size());
  frame[0] = static_cast<char>(n >> 24);
  frame[1] = static_cast<char>(n >> 16);
  frame[2] = static_cast<char>(n >> 8);
  frame[3] = static_cast<char>(n);
  outgoing_.push_back(frame + body);
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

asio::awaitable<std::string> ServerHandshake(Connection& c, const std::string& token) {
  std::string nonce = RandomHex(32);
  c.Send({{"type", "challenge"}, {"version", kVersion}, {"nonce", nonce}});
  Json hello = co_await c.Receive();
  if (hello["type"] != "hello") throw ProtocolError("expected a hello frame first");
  if (hello.value("version", 0) != kVersion)
    throw ProtocolError("protocol version " + hello.value("version", Json(0)).dump() + " is not " +
                        std::to_string(kVersion));
  std::string role = Field<std::string>(hello, "role");
  if (role != "agent" && role != "client") throw ProtocolError("unknown role '" + role + "'");
  if (!SameSecret(Field<std::string>(hello, "mac"), Hmac(token, nonce + role)))
    throw ProtocolError("authentication failed: wrong token");
  c.Send({{"type", "welcome"}, {"version", kVersion}});
  co_return role;
}

asio::awaitable<void> ClientHandshake(Connection& c, const std::string& token,
                                      const std::string& role) {
  Json challenge = co_await c.Receive();
  if (challenge["type"] != "challenge") throw ProtocolError("expected a challenge from the server");
  std::string nonce = Field<std::string>(challenge, "nonce");
  c.Send({{"type", "hello"},
          {"version", kVersion},
          {"role", role},
          {"mac", Hmac(token, nonce + role)}});
  Json welcome;
  try {
    welcome = co_await c.Receive();
  } catch (const ProtocolError&) {
    throw ProtocolError("the server closed the connection: wrong token or version");
  }
  if (welcome["type"] != "welcome") throw ProtocolError("the server did not welcome us");
}

namespace {
constexpr std::pair<RankExit::Kind, const char*> kExitNames[] = {
    {RankExit::Kind::kExited, "exited"},
    {RankExit::Kind::kSignaled, "signaled"},
    {RankExit::Kind::kLost, "lost"},
    {RankExit::Kind::kNeverStarted, "never_started"},
};
}  // namespace

Json ExitFrame(const RankId& id, const RankExit& exit) {
  const char* how = "exited";
  for (const auto& [kind, name] : kExitNames)
    if (kind == exit.kind) how = name;
  return {
      {"type", "exit"}, {"trial", id.trial}, {"rank", id.rank}, {"how", how}, {"code", exit.code}};
}

RankExit ExitFromFrame(const Json& frame) {
  const std::string how = Field<std::string>(frame, "how");
  const int code = Field<int>(frame, "code");
  for (const auto& [kind, name] : kExitNames)
    if (how == name) return {kind, code};
  throw ProtocolError("an 'exit' frame with how '" + how +
                      "'; expected exited, signaled, lost or never_started");
}

}  // namespace hyperpack::scheduler::protocol
