// hyperpack serve's Prometheus metrics (`hyperpack serve --metrics ADDRESS:PORT`), served at
// http://ADDRESS:PORT/metrics in Prometheus's text format by prometheus-cpp's exposer:
//
//   hyperpack_studies_queued           submitted studies not started yet (while the server
//                                      resumes after a restart)
//   hyperpack_studies_running          studies running now
//   hyperpack_trials{state=...}        the running studies' trials: running, waiting (for room:
//                                      requeued, promoted, or placed behind others), paused,
//                                      completed, pruned, failed, infeasible
//   hyperpack_gpus, hyperpack_gpus_busy, hyperpack_cpu_slots, hyperpack_cpu_slots_busy
//                                      on the agents' nodes up now; busy: held by any study
//   hyperpack_agents                   agents connected now
//   hyperpack_agents_lost_total        agents lost since the server started
//   hyperpack_proposal_seconds         a histogram of how long the tuner took per proposal
//
// No token guards it (Prometheus scrapes without one): it says how busy the cluster is, nothing
// of any study's parameters or values. Loopback is the default.
// Thread-safety: Set, AgentLost and Proposed on one thread (the server's io thread); the
// exposer's threads read the registry, whose metrics are atomic.
#pragma once

#include <memory>
#include <string>

#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler {

class ServerMetrics {
 public:
  struct Sample {
    int studies_queued = 0;
    int studies_running = 0;
    int agents = 0;
    Occupancy run;  // the running studies' together; the nodes' capacity when none runs
  };

  // Listens on `listen` (ADDRESS:PORT; port 0 picks a free one). Errors: a malformed address, or
  // one that cannot be bound (in use, not this machine's).
  static Result<std::unique_ptr<ServerMetrics>> Start(const std::string& listen);
  ~ServerMetrics();

  // ADDRESS:PORT as bound (the port chosen when 0 was asked for).
  const std::string& address() const { return address_; }

  void Set(const Sample& sample);
  void AgentLost();
  void Proposed(double seconds);

 private:
  struct Impl;
  explicit ServerMetrics(std::unique_ptr<Impl> impl, std::string address);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace hyperpack::scheduler
