// What every TLS end of hyperpack (the cluster's connections, the dashboard's HTTPS) does the same
// way with its files: refuse a secret that others may read, and load a certificate, its key, and
// the CA and revocation list that peers' certificates are checked against, into an OpenSSL
// context, with errors that name the file and the flag.
// Thread-safety: functions of their arguments; a context is loaded before any connection uses it.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <string>

#include "hyperpack/status.h"

namespace hyperpack::net {

// kInvalidArgument when `path` is not a regular file ("cannot read the WHAT").
Status CheckReadable(const std::string& path, const char* what);

// kInvalidArgument when `path` is unreadable, or others than its owner may read or write it
// (a key, a token): the message gives the mode and the chmod that mends it.
Status CheckPrivate(const std::string& path, const char* what);

// The files of one end, as --tls-ca, --tls-cert, --tls-key and --tls-crl name them.
struct CertificateFiles {
  std::string ca_file;  // empty: peers show no certificate (a browser, to the dashboard)
  std::string cert_file;
  std::string key_file;  // mode 600
  std::string crl_file;  // optional, with ca_file
};

// TLS 1.3 only, and no session tickets: every connection makes a full handshake.
void RequireTls13(boost::asio::ssl::context& context);

// Loads this end's certificate chain and key (refusing a loose key, or one that is not the
// certificate's), and with ca_file, requires each peer's certificate to chain to that CA and not
// be on the revocation list.
Status LoadCertificates(boost::asio::ssl::context& context, const CertificateFiles& files);

}  // namespace hyperpack::net
