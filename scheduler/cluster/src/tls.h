// The TLS side of hyperpack's connections (credentials.h says what each mode proves): an OpenSSL
// context made once per process from Credentials, for the server's end or a peer's.
//
// TLS-PSK: TLS 1.3 with an external pre-shared key, HMAC-SHA256(token, kPskLabel), under the
// identity kPskIdentity, and (EC)DHE on top (OpenSSL's psk_dhe_ke), so a recorded session stays
// secret even if the token leaks later. No certificate is involved: holding the token is what
// each end proves. Certificates: TLS 1.3, peer verification required on both ends.
// Thread-safety: a TlsContext is immutable once made; connections on any thread may share it.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "hyperpack/scheduler/credentials.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler::tls {

inline constexpr char kPskIdentity[] = "hyperpack/2";
inline constexpr char kPskLabel[] = "hyperpack TLS-PSK v2";

enum class Mode { kPlain, kPsk, kCertificates };
enum class End { kServer, kClient };

class TlsContext {
 public:
  // kInvalidArgument naming the file and what is wrong: a file missing or unreadable, a key
  // readable by others than its owner, a certificate that does not match its key, only some of
  // ca/cert/key given.
  static Result<std::shared_ptr<TlsContext>> Make(const Credentials& credentials, End end);

  Mode mode() const { return mode_; }
  End end() const { return end_; }
  // The OpenSSL context; null for kPlain.
  boost::asio::ssl::context* ssl() { return ssl_.get(); }

 private:
  TlsContext(Mode mode, End end) : mode_(mode), end_(end) {}
  Status SetUpPsk(const std::string& token);
  Status SetUpCertificates(const Credentials& credentials);

  Mode mode_;
  End end_;
  std::unique_ptr<boost::asio::ssl::context> ssl_;
  std::string psk_;  // the derived key (binary), read by OpenSSL's callbacks
};

// A TLS failure's text for people: OpenSSL's reason, with what usually causes it.
std::string HandshakeError(const std::string& reason, Mode mode);

}  // namespace hyperpack::scheduler::tls
