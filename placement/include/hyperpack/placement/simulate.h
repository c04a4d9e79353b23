// Simulation with the real placement code: a workload (submit time, duration, GPUs per job)
// replayed in virtual time on a cluster of identical GPU nodes, and the figures that say how well
// it was packed. Also the synthetic workloads used by tests and benchmarks. Pure: the trace comes
// as text and the clock that times the passes from the caller. Thread-safety: pure functions over
// values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/placement/placement.h"
#include "hyperpack/status.h"

namespace hyperpack::scheduler {

struct TraceJob {
  double submit = 0;    // seconds
  double duration = 0;  // seconds
  int gpus = 1;         // one rank per GPU; jobs larger than a node span nodes
};

// CSV text with the header `submit_time,duration,gpus`; errors name `path` (where the text was
// read from), the line and the column.
Result<std::vector<TraceJob>> ParseTrace(std::string_view text, const std::string& path);
std::string TraceCsv(const std::vector<TraceJob>& jobs);

struct SimulationOptions {
  int nodes = 64;
  int gpus_per_node = 8;
  Policy policy = Policy::kBestFit;
  QueueOptions queue;
  // How wrong the scheduler's estimates are: each is the true duration x exp(e), e normal with
  // this standard deviation (0: exact), drawn from noise_seed and the job's index; backfill's
  // cautious estimate is then the estimate x exp(this), a prediction's one-sd upper end.
  double estimate_noise = 0;
  uint64_t noise_seed = 0;
  // A monotonic clock in milliseconds that times the scheduling passes (the caller's: this code
  // reads none); without one, the passes' times are reported as 0.
  std::function<double()> clock_ms;
};

struct SimulationResult {
  int jobs = 0;
  double gpu_utilisation = 0;  // GPU-seconds used / (GPUs x makespan)
  double makespan = 0;         // last end - first submit
  double lower_bound = 0;      // MakespanLowerBound, from the first submit
  double makespan_ratio = 0;
  double mean_queueing = 0, p95_queueing = 0;  // start - submit
  double mean_jct = 0, p95_jct = 0;            // end - submit
  // Waits of the longest tenth of the jobs (by duration): what a shortest-first order may starve.
  double p99_queueing_longest = 0;
  int passes = 0;                 // scheduling passes run
  double scheduling_seconds = 0;  // time spent in them, by SimulationOptions::clock_ms
  double p99_pass_ms = 0;
};

// A makespan no schedule of `jobs` on `total_gpus` GPUs can beat, from the first submit: the
// largest of every job's submit + duration, and, for each submit time s, (s - first submit) + the
// GPU-seconds submitted at or after s / total_gpus (that work cannot start before s). At s = the
// first submit the second is the total work over the cluster; the later ones count the idle time
// that arrivals force. Gangs' packing is not counted, so the bound stays below the best schedule.
double MakespanLowerBound(const std::vector<TraceJob>& jobs, double total_gpus);

// Runs the workload to completion. The scheduler's estimates are the durations, exact or with
// estimate_noise. Errors: a job larger than the cluster, an estimate_noise, aging or max_wait
// below 0.
Result<SimulationResult> Simulate(const std::vector<TraceJob>& jobs, const SimulationOptions& o);

// A simulation's result for people: a line saying what ran on what (cluster, policy, queue order,
// guard, noise) and one line each for utilisation, makespan, queueing, completion times and the
// scheduling passes. Ends with a newline.
std::string SimulationText(const SimulationResult& r, const SimulationOptions& o);
// The same for programs: one JSON object (indented), with the options that shaped it.
std::string SimulationJson(const SimulationResult& r, const SimulationOptions& o);

// A tuning workload: bursts (a tuner proposing a batch when capacity frees) of 4-16 trials that ask
// 1, 2, 4 or 8 GPUs (40/30/20/10%), log-normal durations (median 30 min, sigma 1, 1 min to 8 h),
// bursts arriving as a Poisson process (the default gap loads a 64 x 8 cluster at about 1.5).
std::vector<TraceJob> TuningWorkload(int jobs, uint64_t seed, double mean_gap_s = 100);
// A shared-cluster workload (heavy-tailed, as published traces of GPU clusters are): Poisson
// arrivals, mostly 1-GPU jobs, some 8, a few 16 and 32 that must span nodes, log-normal durations
// (median 20 min, sigma 1.5); the default gap loads a 64 x 8 cluster at about 1.2.
std::vector<TraceJob> SharedClusterWorkload(int jobs, uint64_t seed, double mean_gap_s = 15);

}  // namespace hyperpack::scheduler
