#include "hyperpack/net/tls_files.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <sys/stat.h>

#include <cstdio>

namespace hyperpack::net {
namespace {

namespace ssl = boost::asio::ssl;

std::string Octal(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%03o", mode & 0777);
  return text;
}

Status LoadPeerCa(ssl::context& context, const CertificateFiles& f) {
  HP_RETURN_IF_ERROR(CheckReadable(f.ca_file, "CA certificate (--tls-ca)"));
  boost::system::error_code ec;
  context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  if (context.load_verify_file(f.ca_file, ec); ec)
    return Status::Invalid(f.ca_file, ": not a PEM CA certificate (", ec.message(), ")");
  if (f.crl_file.empty()) return Status::Ok();
  HP_RETURN_IF_ERROR(CheckReadable(f.crl_file, "revocation list (--tls-crl)"));
  X509_STORE* store = SSL_CTX_get_cert_store(context.native_handle());
  X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
  if (lookup == nullptr || X509_load_crl_file(lookup, f.crl_file.c_str(), X509_FILETYPE_PEM) <= 0)
    return Status::Invalid(f.crl_file, ": not a PEM certificate revocation list");
  X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  return Status::Ok();
}

}  // namespace

Status CheckReadable(const std::string& path, const char* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::Invalid(path, ": cannot read the ", what, " (no such file)");
  return Status::Ok();
}

Status CheckPrivate(const std::string& path, const char* what) {
  HP_RETURN_IF_ERROR(CheckReadable(path, what));
  struct stat st {};
  stat(path.c_str(), &st);
  if ((st.st_mode & 077) != 0)
    return Status::Invalid(path, ": the ", what, " is open to other users (mode ",
                           Octal(st.st_mode), "); chmod 600 ", path);
  return Status::Ok();
}

void RequireTls13(ssl::context& context) {
  SSL_CTX* native = context.native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
}

Status LoadCertificates(ssl::context& context, const CertificateFiles& f) {
  if (f.ca_file.empty() && !f.crl_file.empty())
    return Status::Invalid("--tls-crl goes with --tls-ca: the CA whose revocations it lists");
  HP_RETURN_IF_ERROR(CheckReadable(f.cert_file, "certificate (--tls-cert)"));
  HP_RETURN_IF_ERROR(CheckPrivate(f.key_file, "private key (--tls-key)"));
  boost::system::error_code ec;
  if (context.use_certificate_chain_file(f.cert_file, ec); ec)
    return Status::Invalid(f.cert_file, ": not a PEM certificate (", ec.message(), ")");
  if (context.use_private_key_file(f.key_file, ssl::context::pem, ec); ec)
    return Status::Invalid(f.key_file, ": not a PEM private key (", ec.message(), ")");
  if (SSL_CTX_check_private_key(context.native_handle()) != 1)
    return Status::Invalid(f.key_file, ": not the key of the certificate ", f.cert_file);
  if (f.ca_file.empty()) return Status::Ok();
  return LoadPeerCa(context, f);
}

}  // namespace hyperpack::net
