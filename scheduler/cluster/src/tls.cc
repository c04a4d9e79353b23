#include "tls.h"

#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

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

std::string Octal(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%03o", mode & 0777);
  return text;
}

Status Readable(const std::string& path, const char* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::Invalid(path, ": cannot read the ", what, " (no such file)");
  return Status::Ok();
}

}  // namespace

Status CheckPrivate(const std::string& path, const char* what) {
  HP_RETURN_IF_ERROR(Readable(path, what));
  struct stat st {};
  stat(path.c_str(), &st);
  if ((st.st_mode & 077) != 0)
    return Status::Invalid(path, ": the ", what, " is open to other users (mode ",
                           Octal(st.st_mode), "); chmod 600 ", path);
  return Status::Ok();
}

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
  SSL_CTX* native = out->ssl_->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  // No resumption: every connection does a full handshake, and the server sends no tickets.
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
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
  HP_RETURN_IF_ERROR(Readable(c.ca_file, "CA certificate (--tls-ca)"));
  HP_RETURN_IF_ERROR(Readable(c.cert_file, "certificate (--tls-cert)"));
  HP_RETURN_IF_ERROR(CheckPrivate(c.key_file, "private key (--tls-key)"));
  boost::system::error_code ec;
  ssl_->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  if (ssl_->load_verify_file(c.ca_file, ec); ec)
    return Status::Invalid(c.ca_file, ": not a PEM CA certificate (", ec.message(), ")");
  if (ssl_->use_certificate_chain_file(c.cert_file, ec); ec)
    return Status::Invalid(c.cert_file, ": not a PEM certificate (", ec.message(), ")");
  if (ssl_->use_private_key_file(c.key_file, ssl::context::pem, ec); ec)
    return Status::Invalid(c.key_file, ": not a PEM private key (", ec.message(), ")");
  SSL_CTX* native = ssl_->native_handle();
  if (SSL_CTX_check_private_key(native) != 1)
    return Status::Invalid(c.key_file, ": not the key of the certificate ", c.cert_file);
  if (!c.crl_file.empty()) {
    HP_RETURN_IF_ERROR(Readable(c.crl_file, "revocation list (--tls-crl)"));
    X509_STORE* store = SSL_CTX_get_cert_store(native);
    X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (lookup == nullptr || X509_load_crl_file(lookup, c.crl_file.c_str(), X509_FILETYPE_PEM) <= 0)
      return Status::Invalid(c.crl_file, ": not a PEM certificate revocation list");
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  }
  return Status::Ok();
}

std::string HandshakeError(const std::string& reason, Mode mode) {
  return "TLS handshake failed (" + reason + "): " +
         (mode == Mode::kPsk
              ? "a wrong token, or a peer that uses certificates"
              : "a certificate the other end does not accept (another CA, revoked, expired, "
                "or not for this host), or a peer without certificates");
}

}  // namespace hyperpack::scheduler::tls
