// hyperpack dashboard: a read-only HTTP server (Boost.Beast) over one storage file. Every study has
// a page, the study page of `hyperpack report` (docs/REPORT.md), which polls for its data while a
// study runs:
//   GET /                  the studies, each linking to its page
//   GET /study/NAME        the study page, live
//   GET /api/study/NAME    the page's data (JSON)
//   GET /api/studies       the studies (JSON, as `hyperpack status --json`)
// On a loopback address it answers anyone on this machine. Anywhere else it needs a token, and a
// request without it (`Authorization: Bearer TOKEN`, or `?token=TOKEN`, which the pages pass on
// when they poll) is answered 401; and it serves HTTPS (TLS 1.3, its certificate and key), unless
// told --insecure. With a CA as well, a client must show a certificate that CA signed (mutual
// TLS), besides the token. On an HTTPS port, a plain HTTP request is answered 400 and nothing
// else; a failed handshake is logged and closed.
//
// Threads: one thread runs the io_context (connections, parsing, timeouts); storage reads and the
// pages' making run on a small pool, each on its own read-only connection, and post their result
// back. A request is bounded (16 KiB of header, no body, 30 s to arrive); nothing a client sends
// can end the server.
#pragma once

#include <functional>
#include <string>

#include "hyperpack/status.h"

namespace hyperpack::dashboard {

struct DashboardOptions {
  std::string listen = "127.0.0.1:8080";  // IP:PORT; port 0 picks a free one
  std::string storage_path;
  std::string token;  // required unless `listen` is a loopback address
  // HTTPS: the server's certificate and key (PEM, the key mode 600). With tls_ca_file, clients'
  // certificates are required and checked against it (and tls_crl_file, when given).
  std::string tls_cert_file, tls_key_file, tls_ca_file, tls_crl_file;
  bool insecure = false;  // plain HTTP beyond loopback, by choice (a warning is logged)
  // Called once the server listens, with its URL ("http://127.0.0.1:8080/", or https://).
  std::function<void(const std::string& url)> on_listening;
  // Called on the io thread after each response: "GET /study/mnist 200" (the path alone, never
  // its query, which may hold the token; bytes other than printable ASCII as '?'); and for a
  // refused handshake, and the warning of --insecure.
  std::function<void(const std::string& line)> log;
};

// Serves until SIGINT or SIGTERM. An error when it cannot listen, or would listen beyond loopback
// with no token, or with neither a certificate nor --insecure; or a TLS file is missing, loose
// (a key others may read) or malformed.
Status RunDashboard(const DashboardOptions& options);

}  // namespace hyperpack::dashboard
