#include "hyperpack/warm.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hyperpack/text.h"

namespace hyperpack::warm {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kRun = "run ";
constexpr std::string_view kExit = "exit ";
constexpr std::string_view kSignal = "signal ";
// Two descriptors are all a run request carries; room for a few more so that a confused peer's
// extra descriptors are received (and closed by the caller) rather than leaked in flight.
constexpr size_t kMaxFds = 8;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Result<std::vector<std::string>> Strings(const Json& j, const char* field) {
  if (!j.contains(field) || !j[field].is_array())
    return Status::Invalid("run request: '", field, "' must be a list of strings");
  std::vector<std::string> out;
  for (const Json& item : j[field]) {
    if (!item.is_string())
      return Status::Invalid("run request: '", field, "' must be a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

std::string FormatRun(const RunRequest& request) {
  Json j = {{"argv", request.argv}, {"env", request.env}, {"workdir", request.workdir}};
  // Invalid UTF-8 in an environment is replaced rather than thrown on.
  return std::string(kRun) + j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<RunRequest> ParseRun(std::string_view message) {
  if (!StartsWith(message, kRun)) return Status::Invalid("not a run request");
  Json j = Json::parse(message.substr(kRun.size()), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Invalid("run request: not a JSON object");
  RunRequest r;
  HP_ASSIGN_OR_RETURN(r.argv, Strings(j, "argv"));
  HP_ASSIGN_OR_RETURN(r.env, Strings(j, "env"));
  if (r.argv.empty()) return Status::Invalid("run request: 'argv' is empty");
  if (j.contains("workdir")) {
    if (!j["workdir"].is_string())
      return Status::Invalid("run request: 'workdir' must be a string");
    r.workdir = j["workdir"].get<std::string>();
  }
  return r;
}

std::string FormatEnd(const TrialEnd& end) {
  return StrCat(end.how == TrialEnd::How::kSignaled ? kSignal : kExit, end.number);
}

std::optional<TrialEnd> ParseEnd(std::string_view message) {
  for (auto [prefix, how] :
       {std::pair{kExit, TrialEnd::How::kExited}, std::pair{kSignal, TrialEnd::How::kSignaled}}) {
    if (!StartsWith(message, prefix)) continue;
    auto n = ParseInt(message.substr(prefix.size()));
    if (!n || *n < 0 || *n > 255) return std::nullopt;
    return TrialEnd{how, static_cast<int>(*n)};
  }
  return std::nullopt;
}

std::optional<std::vector<std::string>> TrainerArgv(std::string_view command) {
  // Anything a shell would treat specially, which a process given plain words cannot honour.
  constexpr std::string_view kShellSyntax = "'\"\\$`;&|<>(){}[]*?~#!\n\r";
  std::vector<std::string> words;
  std::string word;
  for (char c : command) {
    if (kShellSyntax.find(c) != std::string_view::npos) return std::nullopt;
    if (c == ' ' || c == '\t') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  if (words.empty()) return std::nullopt;
  const std::string& program = words.front();
  // `NAME=value hyperpack-trainer` sets a variable: the shell's business.
  if (program.find('=') != std::string::npos) return std::nullopt;
  const size_t slash = program.rfind('/');
  const std::string_view base = slash == std::string::npos
                                    ? std::string_view(program)
                                    : std::string_view(program).substr(slash + 1);
  if (base != "hyperpack-trainer") return std::nullopt;
  return words;
}

Status Send(int socket, std::string_view message, std::span<const int> fds, bool nonblocking) {
  if (message.size() > kMaxMessage)
    return Status::Invalid("a warm-trainer message of ", message.size(), " bytes (at most ",
                           kMaxMessage, ")");
  if (fds.size() > kMaxFds) return Status::Invalid("too many descriptors for one message");
  iovec iov{const_cast<char*>(message.data()), message.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  const int flags = MSG_NOSIGNAL | (nonblocking ? MSG_DONTWAIT : 0);
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, flags);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(message.size())) return Status::Ok();
  return Status::Io("warm trainer socket: ", n < 0 ? std::strerror(errno) : "short write");
}

Result<std::optional<std::string>> Receive(int socket, std::vector<int>* fds) {
  std::string buf(kMaxMessage, '\0');
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::Io("warm trainer socket: ", std::strerror(errno));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
    return Status::Invalid("warm trainer socket: a message over ", kMaxMessage,
                           " bytes or with too many descriptors");
  // A packet socket reads 0 bytes only at end of file: no message here is empty.
  if (n == 0) return std::optional<std::string>();
  buf.resize(static_cast<size_t>(n));
  return std::optional<std::string>(std::move(buf));
}

}  // namespace hyperpack::warm
