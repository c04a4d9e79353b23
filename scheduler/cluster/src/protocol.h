// The wire protocol between `hyperpack serve`, its agents and its clients: length-prefixed JSON
// over TCP. A frame is a 4-byte big-endian length and that many bytes of one JSON object with a
// "type". Version 1.
//
// Every connection proves it holds the shared token before anything else: the server sends
// {"type": "challenge", "version": 1, "nonce": HEX}, the peer answers {"type": "hello",
// "version": 1, "role": "agent"|"client", "mac": HEX(HMAC-SHA256(token, nonce + role))}, and the
// server answers {"type": "welcome"} or closes the connection. A frame that is too large, not
// JSON, or not expected closes that connection (ProtocolError says why) and nothing else.
// Thread-safety: a Connection belongs to one io_context thread.
#pragma once

#include <boost/asio.hpp>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "hyperpack/scheduler/executor.h"

namespace hyperpack::scheduler::protocol {

namespace asio = boost::asio;
using Json = nlohmann::json;
using tcp = asio::ip::tcp;

constexpr int kVersion = 1;
constexpr size_t kMaxFrame = 1 << 20;

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// HEX(HMAC-SHA256(key, data)).
std::string Hmac(const std::string& key, const std::string& data);
// `bytes` random bytes as hex, from OpenSSL's generator.
std::string RandomHex(size_t bytes);
// Constant-time comparison of two strings.
bool SameSecret(const std::string& a, const std::string& b);
// Reads a token file: its first line, trimmed; an error when it is missing, empty or readable by
// others than its owner would be a warning the caller prints.
std::string ReadTokenFile(const std::string& path, std::string* error);

// One TCP connection carrying frames.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, size_t max_frame = kMaxFrame);

  // The next frame; throws ProtocolError when the peer closed, the frame is oversized or malformed.
  asio::awaitable<Json> Receive();
  // Queues a frame; frames are written in order.
  void Send(const Json& message);
  // Closes the socket; the reason is what Receive's caller reports.
  void Close();
  bool open() const { return socket_.is_open(); }
  const std::string& peer() const { return peer_; }
  // The local address of the connection (what a peer would dial back).
  std::string local_address() const;

 private:
  void WriteNext();

  tcp::socket socket_;
  size_t max_frame_;
  std::string peer_;
  std::deque<std::string> outgoing_;
  bool writing_ = false;
};

// The server's side of the handshake; returns the peer's role or throws ProtocolError.
asio::awaitable<std::string> ServerHandshake(Connection& c, const std::string& token);
// A peer's side; throws ProtocolError when the server refuses.
asio::awaitable<void> ClientHandshake(Connection& c, const std::string& token,
                                      const std::string& role);

// The value of `key` in `message` as a T, or ProtocolError naming what was wrong.
template <typename T>
T Field(const Json& message, const char* key) {
  auto it = message.find(key);
  if (it == message.end())
    throw ProtocolError(std::string("a '") + message.value("type", "?") + "' frame without '" +
                        key + "'");
  try {
    return it->get<T>();
  } catch (const std::exception&) {
    throw ProtocolError(std::string("'") + key + "' has the wrong type in a '" +
                        message.value("type", "?") + "' frame");
  }
}

// How a rank ended, as an "exit" frame: {"type": "exit", "trial", "rank", "how": exited |
// signaled | lost | never_started, "code"}.
Json ExitFrame(const RankId& id, const RankExit& exit);
// The RankExit of an "exit" frame; ProtocolError when "how" or "code" is missing or unknown.
RankExit ExitFromFrame(const Json& frame);

}  // namespace hyperpack::scheduler::protocol
