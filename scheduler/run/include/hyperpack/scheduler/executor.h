// Where a trial's ranks run. The runner decides what runs where; an Executor starts the processes
// and reports their output and their ends: LocalExecutor on this machine (fork, pipes, SIGCHLD),
// AgentExecutor through `hyperpack agent`s on other machines.
// Thread-safety: every method, and every callback, runs on the io_context thread that owns the
// runner.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "hyperpack/placement/placement.h"
#include "hyperpack/scheduler/process.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler {

struct RankId {
  int trial = 0;
  int rank = 0;
  bool operator<(const RankId& o) const {
    return trial != o.trial ? trial < o.trial : rank < o.rank;
  }
  bool operator==(const RankId& o) const { return trial == o.trial && rank == o.rank; }
};

// One trial's ranks, to be started together.
struct GangRequest {
  int trial = 0;
  int root = 0;  // the first attempt's number (its folder holds the checkpoints)
  int attempt = 1;
  std::string trial_dir;
  struct Rank {
    int node = 0;  // an index into the runner's cluster
    int gpus = 0;  // GPUs placed for it
    int cpus = 0;  // CPU slots placed for it
    SpawnRequest request;
    GpuShare share = {};  // any(): its one GPU is shared, and this is its part
  };
  std::vector<Rank> ranks;
};
// How many of a gang's ranks started, in order, and why the next one did not.
struct GangStarted {
  int started = 0;
  Status status;
};

class Executor {
 public:
  struct Callbacks {
    // A line of the rank's stdout (is_err false) or stderr, without its newline.
    std::function<void(RankId, bool is_err, const std::string& line)> on_line;
    // The rank ended; all its output came before.
    std::function<void(RankId, RankExit)> on_exit;
    // Optional: the rank's process started, as process group `pgid` (the agent's fence kills it).
    std::function<void(RankId, int pgid)> on_started;
    // Optional: a trial that waited in a cluster's queue (Slurm) started running on `where`.
    std::function<void(int trial, double queued_s, const std::string& where)> on_running;
  };
  virtual ~Executor() = default;
  virtual void SetCallbacks(Callbacks cb) = 0;
  // Starts a rank on node `node` (an index into the runner's cluster). An error means no process
  // was started; kUnavailable: the node is gone (the rank ends as lost with it, and is requeued).
  virtual Status Start(RankId id, int node, const SpawnRequest& request) = 0;
  // Starts a trial's ranks. The default starts each with Start, in order, stopping at the first
  // that cannot start; an executor that runs a trial as one unit (a Slurm job) overrides it.
  virtual GangStarted StartGang(const GangRequest& gang);
  // Sends `signal` to the rank's process group; nothing when it has ended.
  virtual void Signal(RankId id, int signal) = 0;
  // Whether ranks started with SpawnRequest::control get a control socket, and Tell reaches it.
  virtual bool CanTell() const { return false; }
  // Writes `line` (and a newline) to the rank's control socket, without blocking. Errors: no such
  // rank or socket, or the rank has closed it.
  virtual Status Tell(RankId /*id*/, const std::string& /*line*/) {
    return Status::FailedPrecondition("this executor cannot tell trials anything");
  }
  // The run is over: stop waiting for anything.
  virtual void Shutdown() = 0;
};

class Fence;

// Runs ranks as child processes of this one, each in its own process group. Each group is told to
// a fence (hyperpack/scheduler/fence.h) while it runs: `fence`, which must outlive the executor
// (the agent's, with its lease), or else one of the executor's own. A group still running when
// the executor goes, or when this process dies (even by SIGKILL), is killed whole: nothing a
// trial started outlives its runner.
std::unique_ptr<Executor> MakeLocalExecutor(boost::asio::io_context& io, Executor::Callbacks cb,
                                            Fence* fence = nullptr);

}  // namespace hyperpack::scheduler
