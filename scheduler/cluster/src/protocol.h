// The wire protocol between `hyperpack serve`, its agents and its clients: length-prefixed JSON
// over TCP. A frame is a 4-byte big-endian length and that many bytes of one JSON object with a
// "type". Version 1.
//
// Version 2: every connection is TLS 1.3 unless both ends chose plaintext (credentials.h). The
// server sends {"type": "challenge", "version": 2, "nonce": HEX, "tls": true|false} in plaintext;
// with "tls" the peer starts TLS at once (the server checks that the first byte it gets opens a
// TLS record, so an older peer's plaintext hello is refused with a reason), and everything after
// goes through the channel. The peer decides from its own credentials, never from the frame, so
// a challenge altered on the way cannot talk it down to plaintext. Then the peer proves it holds
// the shared token: {"type": "hello", "version": 2, "role": "agent"|"client", "mac":
// HEX(HMAC-SHA256(token, nonce + role))}, and the server answers {"type": "welcome", "version": 2}
// or closes the connection. Peers of another version refuse each other with a reason. A frame that
// is too large, not JSON, or not expected closes that connection (a Status says why) and nothing
// else.
//
// Every frame type is a FrameType and every frame a struct below: programs switch on TypeOf(frame)
// and read a frame only through its struct's FromJson, so a malformed one is an error value
// (kInvalidArgument) that names the frame and the field, never an exception or a silent default.
// Nothing here throws for what arrives from a peer: decoders return Result, and Receive and the
// handshakes return the Status of a closed or broken connection.
// Thread-safety: a Connection belongs to one io_context thread; the rest is pure.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "hyperpack/scheduler/executor.h"
#include "hyperpack/status.h"
#include "tls.h"

namespace hyperpack::scheduler::protocol {

namespace asio = boost::asio;
using Json = nlohmann::json;
using tcp = asio::ip::tcp;

constexpr int kVersion = 2;
// Seconds a peer has for the whole handshake before the server closes the connection.
constexpr double kHandshakeTimeoutS = 10;
constexpr size_t kMaxFrame = 1 << 20;

// What went wrong, for people: a system error's message without Boost's source location.
std::string ErrorText(const std::exception& e);

// HEX(HMAC-SHA256(key, data)).
std::string Hmac(const std::string& key, const std::string& data);
// `bytes` random bytes as hex, from OpenSSL's generator.
std::string RandomHex(size_t bytes);
// Constant-time comparison of two strings.
bool SameSecret(const std::string& a, const std::string& b);
// Reads a token file: its first line, trimmed; empty with *error set when the file is missing,
// the token shorter than 16 characters, or the file open to others than its owner.
std::string ReadTokenFile(const std::string& path, std::string* error);

// A frame's body (what follows the length) as JSON: an object with a string "type";
// kInvalidArgument for anything else: not JSON, not an object, no type. Pure: the decoder the
// fuzzer drives.
Result<Json> ParseFrame(std::string_view body);
// A frame's bytes for `message`: the 4-byte length and the JSON. Text that is not UTF-8 is sent
// with U+FFFD in place of each invalid byte rather than refused (a trial's output is bytes).
// kInvalidArgument when the frame would be larger than `max_frame`.
Result<std::string> EncodeFrame(const Json& message, size_t max_frame = kMaxFrame);

// One TCP connection carrying frames, in TLS once StartTls has succeeded.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, size_t max_frame = kMaxFrame);

  // Writes `message` now, in plaintext, before anything is queued: the server's challenge.
  asio::awaitable<Status> SendFirst(const Json& message);
  // Wraps the connection in TLS and shakes hands as `context`'s end (a client checks that a
  // server's certificate names `host`). A server first checks that the peer opens a TLS record
  // at all. kUnauthenticated with the reason when the handshake fails.
  asio::awaitable<Status> StartTls(tls::TlsContext& context, const std::string& host);
  bool secure() const { return tls_ != nullptr; }

  // The next frame; kUnavailable when the peer closed or the connection broke, kInvalidArgument
  // when the frame is oversized or malformed. Never throws.
  asio::awaitable<Result<Json>> Receive();
  // Queues a frame; frames are written in order. Never throws: a frame that cannot be encoded
  // (over the limit) closes the connection, as the peer could not read it either.
  void Send(const Json& message);
  // Closes the socket; the reason is what Receive's caller reports.
  void Close();
  bool open() const { return Socket().is_open(); }
  const std::string& peer() const { return peer_; }
  // The local address of the connection (what a peer would dial back).
  std::string local_address() const;

 private:
  void WriteNext();
  // The TCP socket, under TLS or not.
  tcp::socket& Socket() { return tls_ ? tls_->next_layer() : socket_; }
  const tcp::socket& Socket() const { return tls_ ? tls_->next_layer() : socket_; }
  asio::awaitable<boost::system::error_code> ReadExactly(asio::mutable_buffer buffer);

  tcp::socket socket_;  // moved into tls_ by StartTls
  std::unique_ptr<asio::ssl::stream<tcp::socket>> tls_;
  size_t max_frame_;
  std::string peer_;
  std::deque<std::string> outgoing_;
  bool writing_ = false;
};

// Every frame type of version 1, by the "type" string it carries.
enum class FrameType {
  kChallenge,  // server -> peer: the nonce to sign
  kHello,      // peer -> server: the role and the signature
  kWelcome,    // server -> peer: the handshake succeeded
  kRegister,   // agent -> server: its node, first
  kHeartbeat,  // agent -> server: still here
  kLaunch,     // server -> agent: start a rank
  kKill,       // server -> agent: signal a rank
  kLine,       // agent -> server: a line of a rank's output
  kExit,       // agent -> server: a rank ended
  kSubmit,     // client -> server: a study to run, first
  kProgress,   // server -> client: a line of the study's progress
  kDone,       // server -> client: the study ended
  kAccepted,   // server -> client: the submission's id, to follow it again after a reconnect
  kCancel,     // client -> server: stop the study followed (Ctrl-C)
  kRequest,    // client -> server: one request about a stored study (a lifecycle verb, ...), first
  kReply,      // server -> client: its answer; the server then closes the connection
};
// The "type" string of `type`.
const char* FrameTypeName(FrameType type);
// The type of `frame`; kInvalidArgument naming it when "type" is missing, not a string or unknown.
Result<FrameType> TypeOf(const Json& frame);

// Who is at the other end of a connection, as the hello frame says: "agent" or "client".
enum class Role { kAgent, kClient };
const char* RoleName(Role role);

// The "type" of `message` when it is a string, else "?": for error messages about any JSON.
std::string TypeText(const Json& message);

// Reads the fields of one frame (or of an object inside one) in order, and keeps the first error:
// a struct's FromJson reads every field it needs and returns Finish(value). After an error, reads
// return T{} and do nothing, so the error is the one a reader stopping at it would give.
class FrameReader {
 public:
  // A reader of `frame` as a frame of `type`: an error first unless it is one (decoding one type as
  // another is a bug, and the error should say so rather than name whichever field is missing).
  FrameReader(const Json& frame, FrameType type);
  // A reader of an object inside a frame (a register frame's running ranks).
  explicit FrameReader(const Json& object) : frame_(object) {}

  // The value of `key` as a T; an error naming the field and the frame when it is absent or of
  // another type, or, for integers, not a whole number in T's range.
  template <typename T>
  T Field(const char* key);
  // Like Field, but `fallback` when `key` is absent: the fields version 1 peers may leave out.
  template <typename T>
  T Optional(const char* key, T fallback) {
    return Has(key) ? Field<T>(key) : fallback;
  }
  bool Has(const char* key) const { return frame_.is_object() && frame_.contains(key); }

  // Records `error` unless one is recorded already.
  void Fail(Status error) {
    if (status_.ok()) status_ = std::move(error);
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  template <typename T>
  Result<T> Finish(T value) const {
    if (!status_.ok()) return status_;
    return value;
  }

 private:
  const Json& frame_;
  Status status_;
};

template <typename T>
T FrameReader::Field(const char* key) {
  if (!ok()) return T{};
  auto it = frame_.is_object() ? frame_.find(key) : frame_.end();
  if (it == frame_.end()) {
    Fail(Status::Invalid("a '", TypeText(frame_), "' frame without '", key, "'"));
    return T{};
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // nlohmann::json converts a float or an out-of-range integer to T unchecked: undefined
    // behaviour for 1e30, a silent wrap to 1 for 4294967297.
    const bool fits = it->is_number_unsigned()  ? std::in_range<T>(it->template get<uint64_t>())
                      : it->is_number_integer() ? std::in_range<T>(it->template get<int64_t>())
                                                : !it->is_number_float();
    if (!fits) {
      Fail(Status::Invalid("'", key, "' is not a whole number in range in a '", TypeText(frame_),
                           "' frame"));
      return T{};
    }
  }
  // get<T>() throws for a value of another type (a string for an int, a list with a number for
  // strings): caught here, the one place a frame's value is converted.
  T value{};
  try {
    value = it->template get<T>();
  } catch (const std::exception&) {
    Fail(Status::Invalid("'", key, "' has the wrong type in a '", TypeText(frame_), "' frame"));
  }
  return value;
}

// ---- Messages ----------------------------------------------------------------------------------
// One struct per frame type. ToJson() gives the frame with its "type"; FromJson(frame) reads one,
// or returns kInvalidArgument naming the frame and field when a field is missing or of the wrong
// type, or when the frame is of another type. Fields marked "optional" may be absent on the wire,
// and read as the default shown.

// {"type": "challenge", "version" (optional, 1), "nonce", "tls" (optional, false)}. Sent in
// plaintext. A peer refuses a challenge of another version with a reason; the server refuses a
// hello of another version.
struct Challenge {
  std::string nonce;
  bool tls = false;
  int version = kVersion;
  Json ToJson() const;
  static Result<Challenge> FromJson(const Json& frame);
};

// {"type": "hello", "version", "role", "mac": HEX(HMAC-SHA256(token, nonce + role))}. FromJson
// refuses another version before reading anything else, as the rest may differ there; "version"
// missing reads as 0.
struct Hello {
  Role role = Role::kClient;
  std::string mac;
  Json ToJson() const;
  static Result<Hello> FromJson(const Json& frame);
};

// {"type": "welcome", "version", "heartbeat_timeout_s" (optional, 0)}: how long the server waits
// for a silent agent before it declares it lost (0: not said); an agent stops its ranks itself
// before then.
struct Welcome {
  double heartbeat_timeout_s = 0;
  Json ToJson() const;
  static Result<Welcome> FromJson(const Json& frame);
};

// Which launch a rank is: the run (the server's submission) and the trial and rank. A trial number
// names one attempt, so this names one attempt's rank: the fencing key. Frames about a rank the
// server does not expect (an attempt it declared lost, a run it no longer has) are ignored and
// the rank is killed.
struct RankRef {
  int64_t run = 0;
  RankId id;
  bool operator<(const RankRef& o) const { return run != o.run ? run < o.run : id < o.id; }
  bool operator==(const RankRef& o) const { return run == o.run && id == o.id; }
};

// {"type": "register", "name", "gpus": [name...], "cpus", "address" (optional, ""), "running"
// (optional, []): [{"run", "trial", "rank"}...], "gpu_memory_mb" (optional, 0)}. An empty address:
// the server uses the address the agent connected from. "running": what an agent that reconnects
// still runs. "gpu_memory_mb": each GPU's memory (0: not known; no share by memory goes there).
struct Register {
  std::string name;
  std::vector<std::string> gpus;  // as CUDA_VISIBLE_DEVICES names them on the agent
  int cpus = 0;
  std::string address;
  std::vector<RankRef> running;
  int64_t gpu_memory_mb = 0;
  Json ToJson() const;
  static Result<Register> FromJson(const Json& frame);
};

// {"type": "heartbeat", "seq" (optional, 0)}: an agent's, every few seconds; the server answers
// each with one carrying the same seq, so the agent knows when the server last heard it.
struct Heartbeat {
  int64_t seq = 0;
  Json ToJson() const;
  static Result<Heartbeat> FromJson(const Json& frame);
};

// {"type": "launch", "run" (optional, 0), "trial", "rank", "command", "workdir" (optional, ""),
// "env": ["NAME=VALUE"...], "warm_argv" (optional, []), "lock" (optional, "")}. warm_argv: a warm
// hyperpack-trainer on the agent's node may serve the rank (SpawnRequest::warm_argv); an agent that
// does not know the field runs `command` as always. lock: SpawnRequest::lock_path, the file the
// trial's attempts take in turn.
struct Launch {
  RankRef ref;
  std::string command;
  std::string workdir;
  std::vector<std::string> env;
  std::vector<std::string> warm_argv;
  std::string lock = "";  // SpawnRequest::lock_path
  Json ToJson() const;
  static Result<Launch> FromJson(const Json& frame);
};

// {"type": "kill", "run" (optional, 0), "trial", "rank", "signal"}.
struct Kill {
  RankRef ref;
  int signal = 0;
  Json ToJson() const;
  static Result<Kill> FromJson(const Json& frame);
};

// Which of a rank's outputs a line came from: "out" or "err".
enum class Stream { kOut, kErr };

// {"type": "line", "run" (optional, 0), "trial", "rank", "stream", "text"}: a line without its
// newline.
struct Line {
  RankRef ref;
  Stream stream = Stream::kOut;
  std::string text;
  Json ToJson() const;
  static Result<Line> FromJson(const Json& frame);
};

// {"type": "exit", "run" (optional, 0), "trial", "rank", "how": exited | signaled | lost |
// never_started, "code"}.
struct Exit {
  RankRef ref;
  RankExit exit;
  Json ToJson() const;
  static Result<Exit> FromJson(const Json& frame);
};

// {"type": "submit", "study_text", "study_path" (optional, "study.yaml"), "max_trials" (optional),
// "max_parallel" (optional), "submission" (optional)}. With "submission": a client that reconnects
// follows what it submitted before (the rest is used only when the server no longer has it).
struct Submit {
  std::string study_text;
  std::string study_path = "study.yaml";  // what the study's error messages name
  std::optional<int> max_trials;
  std::optional<int> max_parallel;
  std::optional<int64_t> submission;
  Json ToJson() const;
  static Result<Submit> FromJson(const Json& frame);
};

// {"type": "progress", "text" (optional, "")}.
struct Progress {
  std::string text;
  Json ToJson() const;
  static Result<Progress> FromJson(const Json& frame);
};

// {"type": "done", "exit_code" (optional, 1), "message" (optional, "")}: the study's exit code as
// `hyperpack run` would give it; a message when it could not run (2: bad input, else 1).
struct Done {
  int exit_code = 1;
  std::string message;
  Json ToJson() const;
  static Result<Done> FromJson(const Json& frame);
};

// {"type": "request", "op", "study", "body" (optional, {})}: what `hyperpack stop --server` and
// the other verbs ask of a study in the server's storage (requests.h decodes each op's body).
enum class RequestOp { kControl, kConditions, kLogs, kAsk, kTell, kHeartbeat };
struct Request {
  RequestOp op = RequestOp::kControl;
  std::string study;
  Json body = Json::object();
  Json ToJson() const;
  static Result<Request> FromJson(const Json& frame);
};

// {"type": "reply", "code" (optional, 0: OK), "message" (optional, ""), "body" (optional, {})}:
// the request's answer, or its error as a StatusCode and message.
struct Reply {
  int code = 0;
  std::string message;
  Json body = Json::object();
  Json ToJson() const;
  static Result<Reply> FromJson(const Json& frame);
};

// {"type": "accepted", "submission"}: the id under which the server keeps a submitted study.
struct Accepted {
  int64_t submission = 0;
  Json ToJson() const;
  static Result<Accepted> FromJson(const Json& frame);
};

// {"type": "cancel"}: the client's user wants the study stopped (as Ctrl-C would stop `run`).
struct Cancel {
  Json ToJson() const;
  static Result<Cancel> FromJson(const Json& frame);
};

// ---- Handshake ---------------------------------------------------------------------------------
// The server's side of the handshake, TLS as `context` says; returns the peer's role, or why the
// peer was refused (kDeadlineExceeded: it did not finish within `timeout_s`, and `c` is closed).
// The welcome tells the peer `heartbeat_timeout_s`.
asio::awaitable<Result<Role>> ServerHandshake(Connection& c, tls::TlsContext& context,
                                              const std::string& token,
                                              double heartbeat_timeout_s = 0,
                                              double timeout_s = kHandshakeTimeoutS);
// A peer's side, to the server at `host`; returns the server's welcome, or why there is none (the
// server refused us, speaks another version or mode, went away, or did not finish within
// `timeout_s`: then `c` is closed, when a shared_ptr owns it).
asio::awaitable<Result<Welcome>> ClientHandshake(Connection& c, tls::TlsContext& context,
                                                 const std::string& host, const std::string& token,
                                                 Role role, double timeout_s = kHandshakeTimeoutS);

// Whether an agent that no server has welcomed yet gives up after a handshake that failed with
// `failure`, the `closed_in_a_row`th in a row to end by a closed connection (kUnavailable) where it
// is one. A refusal (kInvalidArgument: another version or TLS mode, a TLS alert, as a wrong token
// or certificate gets) ends it at once. A connection closed during the handshake is what a
// server that is restarting, going away or past its handshake deadline under load also does, so it
// ends the agent only kClosedHandshakesToGiveUp times in a row (a plaintext server closes on a
// wrong token without saying so). A server that did not answer in time is tried again. Pure.
constexpr int kClosedHandshakesToGiveUp = 6;
bool GivesUpBeforeAnyWelcome(StatusCode failure, int closed_in_a_row);

}  // namespace hyperpack::scheduler::protocol
