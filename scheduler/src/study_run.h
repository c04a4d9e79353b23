// A study run that someone else's io_context drives: how `hyperpack serve` runs a submitted
// study on its agents' nodes with the same runner `hyperpack run` uses.
// Thread-safety: every call on the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "executor.h"
#include "hyperpack/scheduler/runner.h"

namespace hyperpack::scheduler {

class StudyRun {
 public:
  virtual ~StudyRun() = default;
  // Prepares the study in storage and starts placing trials; on_done runs on the io thread when
  // the run is over. An error: nothing started.
  virtual Status Begin(std::function<void(Result<RunSummary>)> on_done) = 0;
  virtual void AddNode(const ClusterNode& node) = 0;
  virtual void RemoveNode(int index) = 0;
  virtual void Interrupt() = 0;
};

std::unique_ptr<StudyRun> MakeStudyRun(const study::StudySpec& spec, const RunOptions& options,
                                       boost::asio::io_context& io, std::vector<ClusterNode> nodes,
                                       Executor* executor);

}  // namespace hyperpack::scheduler
