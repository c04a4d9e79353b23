#include "tls.h"

#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include <cstring>

#include "hyperpack/net/tls_files.h"

namespace hyperpack::scheduler::tls {

namespace ssl = boost::asio::ssl;

namespace {

// Where a context keeps its derived key for the PSK callbacks, which OpenSSL calls with the
// connection only.
int KeyIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

const std::string* KeyOf(SSL* ssl) {
  return static_cast<const std::string*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), KeyIndex()));
}

unsigned int ServerPsk(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_len) {
  const std::string* key = KeyOf(ssl);
  if (key == nullptr || identity == nullptr || std::strcmp(identity, kPskIdentity) != 0 ||
      key->size() > max_len)
    return 0;
  std::memcpy(psk, key->data(), key->size());
  return static_cast<unsigned int>(key->size());
}

unsigned int ClientPsk(SSL* ssl, const char* /*hint*/, char* identity, unsigned int max_identity,
                       unsigned char* psk, unsigned int max_len) {
  const std::string* key = KeyOf(ssl);
  if (key == nullptr || key->size() > max_len || sizeof(kPskIdentity) > max_identity) return 0;
  std::memcpy(identity, kPskIdentity, sizeof(kPskIdentity));
  std::memcpy(psk, key->data(), key->size());
  return static_cast<unsigned int>(key->size());
}

}  // namespace

Result<std::shared_ptr<TlsContext>> TlsContext::Make(const Credentials& c, End end) {
  if (c.insecure) return std::shared_ptr<TlsContext>(new TlsContext(Mode::kPlain, end));
  const int given = !c.ca_file.empty() + !c.cert_file.empty() + !c.key_file.empty();
  if (given != 0 && given != 3)
    return Status::Invalid(
        "certificates need all three of --tls-ca, --tls-cert and --tls-key (or none of them, "
        "for TLS from the token alone)");
  if (given == 0 && !c.crl_file.empty())
    return Status::Invalid("--tls-crl goes with certificates (--tls-ca, --tls-cert, --tls-key)");
  std::shared_ptr<TlsContext> out(
      new TlsContext(given == 3 ? Mode::kCertificates : Mode::kPsk, end));
  out->ssl_ = std::make_unique<ssl::context>(end == End::kServer ? ssl::context::tls_server
                                                                 : ssl::context::tls_client);
  // No resumption: every connection does a full handshake, and the server sends no tickets.
  net::RequireTls13(*out->ssl_);
  HP_RETURN_IF_ERROR(out->mode_ == Mode::kPsk ? out->SetUpPsk(c.token) : out->SetUpCertificates(c));
  return out;
}

Status TlsContext::SetUpPsk(const std::string& token) {
  if (token.empty()) return Status::Invalid("TLS from the token needs a token (--token-file)");
  unsigned char key[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(kPskLabel), sizeof(kPskLabel) - 1, key, &len);
  psk_.assign(reinterpret_cast<const char*>(key), len);
  SSL_CTX* native = ssl_->native_handle();
  SSL_CTX_set_ex_data(native, KeyIndex(), &psk_);
  // OpenSSL's legacy PSK callbacks serve TLS 1.3 with SHA-256 suites only.
  SSL_CTX_set_ciphersuites(native, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256");
  if (end_ == End::kServer)
    SSL_CTX_set_psk_server_callback(native, ServerPsk);
  else
    SSL_CTX_set_psk_client_callback(native, ClientPsk);
  return Status::Ok();
}

Status TlsContext::SetUpCertificates(const Credentials& c) {
  return net::LoadCertificates(*ssl_, {c.ca_file, c.cert_file, c.key_file, c.crl_file});
}

std::string HandshakeError(const std::string& reason, Mode mode) {
  return "TLS handshake failed (" + reason + "): " +
         (mode == Mode::kPsk
              ? "a wrong token, or a peer that uses certificates"
              : "a certificate the other end does not accept (another CA, revoked, expired, "
                "or not for this host), or a peer without certificates");
}

}  // namespace hyperpack::scheduler::tls
