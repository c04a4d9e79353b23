// What one end of a hyperpack connection proves itself with, and how the connection is protected.
//
// Every connection between `hyperpack serve`, its agents and its clients is TLS 1.3, both ends
// authenticated, unless both ends choose plaintext (`insecure`):
// - by default from the shared token alone (TLS-PSK: a key derived from the token), so that a
//   cluster that has a token is encrypted and mutually authenticated with nothing new to set up;
// - with certificates when `ca_file` is set: each end presents its certificate (`cert_file`,
//   `key_file`) signed by that CA and checks the other's against it (and against `crl_file`, a
//   list of revoked certificates, when given); a client also checks that the server's certificate
//   names the host it dialled. The token is still proved inside the channel.
// Key and token files readable by others than their owner are refused.
// Thread-safety: a plain value.
#pragma once

#include <string>

namespace hyperpack::scheduler {

struct Credentials {
  std::string token;  // the shared token: every end proves it holds it
  // Certificates (mutual TLS): all three, or none of them for TLS-PSK from the token.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string crl_file;   // optional: revoked certificates, PEM
  bool insecure = false;  // plaintext, chosen: both ends must choose it
};

}  // namespace hyperpack::scheduler
