// More than one machine: `hyperpack serve` runs the scheduler as a daemon, `hyperpack agent` runs
// on every node and starts the ranks it is given, and `hyperpack run --server` submits a study and
// follows it.
//
// The server listens on loopback unless told otherwise. Every connection is TLS 1.3 with both ends
// authenticated, from the shared token or certificates, unless every end chose plaintext
// (credentials.h), and proves it holds the shared token; a connection that cannot, or that sends an
// oversized or malformed frame, is closed with a logged reason and harms nothing else. Agents
// report their devices, send heartbeats (each answered), stream their ranks' output and exits; an
// agent silent for longer than the heartbeat timeout (or whose connection drops) is lost, and its
// trials are run again, from their checkpoints, up to budget.max_attempts. An agent's fence kills
// its ranks before then, so two attempts of a trial never run at once. Every submitted study runs
// at once, on its weighted fair share of the agents (fair_share.h; `priority:` is the weight; a
// study over its share when another starts preempts its youngest trials, at once or after
// ServeOptions::preempt_after_s); submissions are kept in storage, so a server started again on
// the same storage resumes them; agents and clients reconnect with backoff. Storage is the
// server's, which the read commands open as usual.
//
// Standby: a server holds its storage's leader lease (Storage::TryLead) while it serves. A second
// server started on the same storage (a shared PostgreSQL database, from another host) waits
// without listening until the lease ends, when the first one's process or database session dies,
// and then carries on as a server started again on that storage would. Agents and clients given
// "A:PORT,B:PORT" try the addresses in turn, so they find whichever server listens.
// Thread-safety: each function runs its own io_context on the calling thread until it returns.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "hyperpack/scheduler/credentials.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler {

// The token in a token file: its first line, trimmed. Empty, with *error set, when the file is
// missing, the token shorter than 16 characters, or the file open to others than its owner.
std::string protocol_ReadToken(const std::string& path, std::string* error);

struct ServeOptions {
  std::string listen = "127.0.0.1:7766";  // ADDRESS:PORT; port 0 picks a free one
  Credentials credentials;
  std::string storage_path = "hyperpack.db";
  std::string log_dir;
  double heartbeat_timeout_s = 30;
  // A study over its share when another starts: seconds for its trials to end by themselves
  // before its youngest are preempted (ControllerOptions::preempt_after_s). 0: at once.
  double preempt_after_s = 0;
  // ADDRESS:PORT to serve Prometheus metrics on (/metrics; server_metrics.h lists them); empty:
  // none. Printed as "metrics on http://ADDRESS:PORT/metrics" once listening.
  std::string metrics_listen;
  std::ostream* log = nullptr;  // one line per event; default std::cout
};
// Runs until SIGINT or SIGTERM. It prints "listening on ADDRESS:PORT" first.
Status Serve(const ServeOptions& options);

struct AgentOptions {
  std::string connect;  // HOST:PORT of the server, or HOST:PORT,HOST:PORT,...: it and its standbys
  Credentials credentials;
  std::string name;                // default: the host name
  int fake_gpus = -1;              // >= 0: pretend to have this many GPUs
  int64_t fake_gpu_memory_mb = 0;  // with fake_gpus: each one's memory (0: not known)
  double heartbeat_s = 5;
  std::ostream* log = nullptr;
};
// Runs until SIGINT/SIGTERM (OK; its ranks are killed then), reconnecting whenever the server
// goes away. An error: the address cannot be resolved, or the server refused the first handshake
// (a wrong token or protocol version).
Status RunAgent(const AgentOptions& options);

struct SubmitOptions {
  std::string server;  // HOST:PORT, or HOST:PORT,HOST:PORT,...: a server and its standbys
  Credentials credentials;
  std::string study_text;
  std::string study_path;
  std::optional<int> max_trials, max_parallel;
  std::ostream* out = nullptr;
};
// Submits a study and prints its progress; returns the run's exit code (0, 1, 2, 130). Once the
// server has accepted it, a lost connection is retried and the submission followed again. Ctrl-C
// asks the server to stop the study; a second one returns 130 at once.
Result<int> SubmitStudy(const SubmitOptions& options);

}  // namespace hyperpack::scheduler
