// A real one-node Slurm cluster for tests: munged, slurmctld and slurmd started as child processes
// of the test, with everything (config, keys, sockets, state, logs, fake GPU device files) under
// one temporary directory that is removed when the object dies.
//
// Needs root (mknod for the GPU files, SlurmUser=root) and the Debian packages slurmctld, slurmd,
// slurm-client and munge; scripts/test installs them. Several clusters may run on one machine at
// once: each has its own ports, munge socket and directory.
//
// The node is called `localhost`. Partitions: `debug` (default, PriorityTier=1, PreemptMode from
// Options) and `high` (PriorityTier=2, never preempted), so a job in `high` that needs the node's
// CPUs preempts jobs in `debug`. Finished jobs stay in `squeue --states=all` for ten minutes, and
// `sacct -c` reads them from the job completion file (there is no slurmdbd: plain `sacct` says that
// accounting is disabled). A job requeued by `scontrol requeue` becomes eligible only after about
// two minutes unless released with `scontrol update JobId=N StartTime=now`.
//
// Not thread-safe to create or destroy concurrently with use; Run may be called from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace hyperpack::testing {

class LocalSlurm {
 public:
  struct Options {
    int gpus = 4;        // fake GPUs (character devices under dir()/gpu); 0: no GRES at all
    int gpu_shards = 0;  // Slurm's shard gres: this many shards on each fake GPU; 0: none
    int cpus = 0;        // 0: the machine's online CPUs; more than that drains the node
    std::string preempt_mode = "REQUEUE";  // for partition `debug` and globally: REQUEUE or CANCEL
  };

  // Starts the daemons and waits (at most 30 s) until the node is idle. Returns nullptr and sets
  // `error` (which daemon failed and the tail of its log) when the cluster could not start.
  static std::unique_ptr<LocalSlurm> Start(const Options& options, std::string* error);

  // Cancels every job and waits (bounded) for them to end, stops slurmd, slurmctld and munged by
  // pid (SIGTERM, then SIGKILL), kills any slurmstepd or job process of this cluster that is left,
  // and removes dir().
  ~LocalSlurm();

  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;

  // Path of slurm.conf; clients need SLURM_CONF set to it.
  const std::string& conf() const { return conf_; }
  // What to add to a child's environment so Slurm's clients find this cluster ("SLURM_CONF=...").
  // A caller that inherits SLURM_* variables (a test run inside a Slurm job) should drop those.
  std::vector<std::string> Env() const;
  // The temporary directory everything lives in.
  std::string dir() const { return dir_; }
  int cpus() const { return cpus_; }
  int gpus() const { return gpus_; }

  // Runs a client command (e.g. {"squeue", "-h"}, looked up in PATH) in dir() with this cluster's
  // environment (inherited SLURM_* variables dropped); returns its exit code (128 + signal when
  // killed, -1 when it could not run) and sets `output` to its stdout and stderr together.
  int Run(const std::vector<std::string>& argv, std::string* output) const;

 private:
  struct Daemon {
    std::string name;  // "munged", "slurmctld", "slurmd"
    pid_t pid = -1;
  };

  LocalSlurm() = default;
  // Each returns an empty string on success, else what went wrong.
  std::string StartMunge();
  std::string StartSlurm(const Options& options);
  std::string WaitForIdleNode();
  // Forks and execs `argv` in its own session, stdout and stderr to dir()/<name>.out.
  std::string Spawn(const std::string& name, const std::vector<std::string>& argv, Daemon* daemon);
  // Non-empty when the daemon has exited (it is then reaped): how it ended and its log's tail.
  std::string Exited(Daemon* daemon);
  std::string LogTail(const std::string& name) const;
  void CancelJobs();
  void Stop(Daemon* daemon);
  void KillLeftovers();

  std::string dir_, conf_;
  int cpus_ = 0, gpus_ = 0;
  Daemon munged_, slurmctld_, slurmd_;
};

}  // namespace hyperpack::testing
