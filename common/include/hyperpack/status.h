// Status and Result<T>: how every module boundary reports failure.
//
// A Status is either OK or carries a code and a human-readable message that names what went wrong
// and, where possible, what would be right. Result<T> is a T or a non-OK Status; the caller must
// look at ok() before taking the value. Exceptions thrown by libraries (yaml-cpp, nlohmann, Asio)
// are caught inside the module that calls them and turned into a Status there.
// Thread-safety: plain values; safe to copy and move between threads.
#pragma once

#include <cassert>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace hyperpack {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from a user: a study file, a flag, a value
  kNotFound,            // a study, trial or file that does not exist
  kAlreadyExists,       // a unique name taken
  kFailedPrecondition,  // the system is not in a state to do this (e.g. a study already running)
  kIo,                  // the file system or a database failed
  kNumeric,             // a numerical method failed (e.g. a matrix not positive definite)
  kCancelled,           // stopped on request (Ctrl-C)
  kUnavailable,         // a peer that is gone (an agent lost with its node)
  kInternal,            // a bug: should not happen
  // A peer that did not answer in time (a handshake past its deadline). Last, so that the codes
  // before it keep their numbers on the wire.
  kDeadlineExceeded,
};

// Concatenates anything an ostream can print. Used for error messages.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  template <typename... Args>
  static Status Invalid(const Args&... args) {
    return Status(StatusCode::kInvalidArgument, StrCat(args...));
  }
  template <typename... Args>
  static Status NotFound(const Args&... args) {
    return Status(StatusCode::kNotFound, StrCat(args...));
  }
  template <typename... Args>
  static Status AlreadyExists(const Args&... args) {
    return Status(StatusCode::kAlreadyExists, StrCat(args...));
  }
  template <typename... Args>
  static Status FailedPrecondition(const Args&... args) {
    return Status(StatusCode::kFailedPrecondition, StrCat(args...));
  }
  template <typename... Args>
  static Status Unavailable(const Args&... args) {
    return Status(StatusCode::kUnavailable, StrCat(args...));
  }
  template <typename... Args>
  static Status Io(const Args&... args) {
    return Status(StatusCode::kIo, StrCat(args...));
  }
  template <typename... Args>
  static Status Numeric(const Args&... args) {
    return Status(StatusCode::kNumeric, StrCat(args...));
  }
  template <typename... Args>
  static Status Cancelled(const Args&... args) {
    return Status(StatusCode::kCancelled, StrCat(args...));
  }
  template <typename... Args>
  static Status DeadlineExceeded(const Args&... args) {
    return Status(StatusCode::kDeadlineExceeded, StrCat(args...));
  }
  template <typename... Args>
  static Status Internal(const Args&... args) {
    return Status(StatusCode::kInternal, StrCat(args...));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // A copy of this status with `context` put in front of the message ("opening x: ...").
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "a Result built from a Status must carry an error");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace hyperpack

// Returns early with the status of `expr` when it is not OK.
#define HP_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::hyperpack::Status hp_status_ = (expr); \
    if (!hp_status_.ok()) return hp_status_; \
  } while (0)

#define HP_CONCAT_INNER_(a, b) a##b
#define HP_CONCAT_(a, b) HP_CONCAT_INNER_(a, b)
// `HP_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its error.
#define HP_ASSIGN_OR_RETURN(lhs, expr) \
  HP_ASSIGN_OR_RETURN_IMPL_(HP_CONCAT_(hp_result_, __LINE__), lhs, expr)
#define HP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
