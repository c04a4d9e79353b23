// A study run that someone else's io_context drives: how `hyperpack serve` runs a submitted
// study on its agents' nodes with the same runner `hyperpack run` uses.
// Thread-safety: every call on the io_context's thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "hyperpack/placement/fair_share.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/scheduler/study_controller.h"

namespace hyperpack::scheduler {

class StudyRun {
 public:
  virtual ~StudyRun() = default;
  // Prepares the study in storage (on the pool) and starts placing trials; on_done runs on the
  // io thread when the run is over, or with the error that kept it from starting. An error
  // returned here: nothing started and on_done will not run.
  virtual Status Begin(std::function<void(Result<RunSummary>)> on_done) = 0;
  virtual void AddNode(const ClusterNode& node) = 0;
  virtual void RemoveNode(int index) = 0;
  virtual void Interrupt() = 0;
  // What it holds now (all zero before the study is prepared).
  virtual Occupancy occupancy() const = 0;
  // Sharing a server with other studies (fair_share.h): what it holds and would place now, with
  // its priority as the weight; nullopt until the study is prepared (it holds nothing then).
  virtual std::optional<ShareClaim> Claim() const = 0;
  // What it may hold from now on. Before the study is prepared, it is applied once it is.
  virtual void SetShare(const ShareGrant& grant) = 0;
  // Runs on the io thread after each batch of events, when what the run holds or wants may have
  // changed (the server then divides its nodes again).
  virtual void OnChange(std::function<void()> callback) = 0;
};

// `pool` runs the storage work of its start and end and the tuner; it must outlive the run.
std::unique_ptr<StudyRun> MakeStudyRun(const study::StudySpec& spec, const RunOptions& options,
                                       boost::asio::io_context& io, boost::asio::thread_pool& pool,
                                       std::vector<ClusterNode> nodes, Executor* executor);

}  // namespace hyperpack::scheduler
