#include "hyperpack/scheduler/simulate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <queue>
#include <random>
#include <sstream>

#include "hyperpack/text.h"

namespace hyperpack::scheduler {
namespace {

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double LogNormal(std::mt19937_64& rng, double median, double sigma, double lo, double hi) {
  std::normal_distribution<double> n(0.0, sigma);
  return std::clamp(median * std::exp(n(rng)), lo, hi);
}

}  // namespace

Result<std::vector<TraceJob>> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path, ": cannot read the trace");
  std::string line;
  if (!std::getline(in, line)) return Status::Invalid(path, ": empty; expected a header row");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != "submit_time,duration,gpus")
    return Status::Invalid(path, ":1: expected the header submit_time,duration,gpus, got '", line,
                           "'");
  std::vector<TraceJob> jobs;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() != 3)
      return Status::Invalid(path, ":", number, ": expected 3 columns, got ", cells.size());
    auto submit = ParseDouble(cells[0]);
    auto duration = ParseDouble(cells[1]);
    auto gpus = ParseInt(cells[2]);
    if (!submit || *submit < 0)
      return Status::Invalid(path, ":", number, ": submit_time: '", cells[0],
                             "' is not a time >= 0");
    if (!duration || *duration <= 0)
      return Status::Invalid(path, ":", number, ": duration: '", cells[1], "' is not > 0");
    if (!gpus || *gpus < 1)
      return Status::Invalid(path, ":", number, ": gpus: '", cells[2], "' is not a count >= 1");
    jobs.push_back({*submit, *duration, static_cast<int>(*gpus)});
  }
  return jobs;
}

std::string TraceCsv(const std::vector<TraceJob>& jobs) {
  std::ostringstream out;
  out << "submit_time,duration,gpus\n";
  for (const TraceJob& j : jobs)
    out << FormatShort(j.submit, 10) << "," << FormatShort(j.duration, 8) << "," << j.gpus << "\n";
  return out.str();
}

Result<SimulationResult> Simulate(const std::vector<TraceJob>& jobs, const SimulationOptions& o) {
  std::vector<Node> nodes;
  for (int i = 0; i < o.nodes; ++i)
    nodes.push_back({"node" + std::to_string(i), o.gpus_per_node, 0});
  ClusterState cluster(nodes);
  Scheduler scheduler(&cluster, o.policy);
  SimulationResult r;
  r.jobs = static_cast<int>(jobs.size());
  if (jobs.empty()) return r;

  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].submit < jobs[b].submit; });
  using End = std::pair<double, uint64_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  std::vector<double> start(jobs.size(), -1);
  std::vector<double> pass_ms;
  size_t next = 0;
  double first_submit = jobs[order[0]].submit;
  double gpu_seconds = 0, lb_end = 0, last_end = first_submit;
  for (const TraceJob& j : jobs) {
    gpu_seconds += j.duration * j.gpus;
    lb_end = std::max(lb_end, j.submit + j.duration);
  }
  while (next < order.size() || !ends.empty()) {
    double now = std::numeric_limits<double>::infinity();
    if (next < order.size()) now = jobs[order[next]].submit;
    if (!ends.empty()) now = std::min(now, ends.top().first);
    while (!ends.empty() && ends.top().first <= now) {
      scheduler.Finish(ends.top().second);
      ends.pop();
    }
    while (next < order.size() && jobs[order[next]].submit <= now) {
      size_t i = order[next++];
      Job job;
      job.id = i;
      job.demand = Demand{jobs[i].gpus, 1, 0};
      job.submit = jobs[i].submit;
      job.estimate = jobs[i].duration;
      HP_RETURN_IF_ERROR(scheduler.Submit(job));
    }
    auto t0 = std::chrono::steady_clock::now();
    auto started = scheduler.Schedule(now);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    pass_ms.push_back(ms);
    r.scheduling_seconds += ms / 1000.0;
    for (const auto& s : started) {
      start[s.job.id] = now;
      double end = now + jobs[s.job.id].duration;
      ends.push({end, s.job.id});
      last_end = std::max(last_end, end);
    }
  }
  std::vector<double> waits, jcts;
  for (size_t i = 0; i < jobs.size(); ++i) {
    waits.push_back(start[i] - jobs[i].submit);
    jcts.push_back(start[i] + jobs[i].duration - jobs[i].submit);
  }
  const double total = static_cast<double>(cluster.total_gpus());
  r.makespan = last_end - first_submit;
  r.lower_bound = std::max(lb_end - first_submit, gpu_seconds / total);
  r.makespan_ratio = r.makespan / r.lower_bound;
  r.gpu_utilisation = gpu_seconds / (total * r.makespan);
  r.mean_queueing = Mean(waits);
  r.p95_queueing = Percentile(waits, 0.95);
  r.mean_jct = Mean(jcts);
  r.p95_jct = Percentile(jcts, 0.95);
  r.passes = static_cast<int>(pass_ms.size());
  r.p99_pass_ms = Percentile(pass_ms, 0.99);
  return r;
}

std::vector<TraceJob> TuningWorkload(int jobs, uint64_t seed, double mean_gap_s) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0 / mean_gap_s);
  std::uniform_int_distribution<int> batch(4, 16);
  std::discrete_distribution<int> size({40, 30, 20, 10});
  const int sizes[] = {1, 2, 4, 8};
  std::vector<TraceJob> out;
  double t = 0;
  while (static_cast<int>(out.size()) < jobs) {
    int b = std::min(batch(rng), jobs - static_cast<int>(out.size()));
    for (int i = 0; i < b; ++i)
      out.push_back({t, LogNormal(rng, 1800, 1.0, 60, 8 * 3600), sizes[size(rng)]});
    t += gap(rng);
  }
  return out;
}

std::vector<TraceJob> SharedClusterWorkload(int jobs, uint64_t seed, double mean_gap_s) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0 / mean_gap_s);
  std::discrete_distribution<int> size({70, 12, 10, 5, 2, 1});
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  std::vector<TraceJob> out;
  double t = 0;
  for (int i = 0; i < jobs; ++i) {
    out.push_back({t, LogNormal(rng, 1200, 1.5, 30, 24 * 3600), sizes[size(rng)]});
    t += gap(rng);
  }
  return out;
}

}  // namespace hyperpack::scheduler
