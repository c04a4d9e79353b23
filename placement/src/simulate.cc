#include "hyperpack/placement/simulate.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
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

Result<std::vector<TraceJob>> ParseTrace(std::string_view text, const std::string& path) {
  std::istringstream in{std::string(text)};
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

namespace {

// What a replay saw, in virtual time except for the passes.
struct Timeline {
  std::vector<double> start;  // when each job started
  double first_submit = 0, last_end = 0;
  std::vector<double> pass_ms;    // wall-clock time of each scheduling pass
  double scheduling_seconds = 0;  // their sum
};

// The order of submission; jobs submitted together keep their order in the trace.
std::vector<size_t> SubmitOrder(const std::vector<TraceJob>& jobs) {
  std::vector<size_t> order(jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].submit < jobs[b].submit; });
  return order;
}

Job ToJob(const std::vector<TraceJob>& jobs, size_t i, const SimulationOptions& o) {
  Job job;
  job.id = i;
  job.demand = Demand{jobs[i].gpus, 1, 0};
  job.submit = jobs[i].submit;
  job.estimate = jobs[i].duration;
  if (o.estimate_noise > 0) {
    // Seeded per job, so that two orders or policies see the same errors.
    std::mt19937_64 rng(o.noise_seed * 0x9e3779b97f4a7c15ULL + i);
    std::normal_distribution<double> e(0.0, o.estimate_noise);
    job.estimate *= std::exp(e(rng));
    job.estimate_high = job.estimate * std::exp(o.estimate_noise);
  }
  return job;
}

// Runs `jobs` (not empty) to completion: each step jumps to the next submission or end, finishes
// the jobs that ended, submits those that arrived, and runs one scheduling pass.
Result<Timeline> Replay(const std::vector<TraceJob>& jobs, Scheduler& scheduler,
                        const SimulationOptions& o) {
  const std::vector<size_t> order = SubmitOrder(jobs);
  using End = std::pair<double, uint64_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  Timeline t;
  t.start.assign(jobs.size(), -1);
  t.first_submit = t.last_end = jobs[order[0]].submit;
  size_t next = 0;
  while (next < order.size() || !ends.empty()) {
    double now = std::numeric_limits<double>::infinity();
    if (next < order.size()) now = jobs[order[next]].submit;
    if (!ends.empty()) now = std::min(now, ends.top().first);
    while (!ends.empty() && ends.top().first <= now) {
      scheduler.Finish(ends.top().second);
      ends.pop();
    }
    while (next < order.size() && jobs[order[next]].submit <= now) {
      HP_RETURN_IF_ERROR(scheduler.Submit(ToJob(jobs, order[next++], o)));
    }
    const double t0 = o.clock_ms ? o.clock_ms() : 0;
    auto started = scheduler.Schedule(now);
    const double ms = o.clock_ms ? o.clock_ms() - t0 : 0;
    t.pass_ms.push_back(ms);
    t.scheduling_seconds += ms / 1000.0;
    for (const auto& s : started) {
      t.start[s.job.id] = now;
      double end = now + jobs[s.job.id].duration;
      ends.push({end, s.job.id});
      t.last_end = std::max(t.last_end, end);
    }
  }
  return t;
}

}  // namespace

double MakespanLowerBound(const std::vector<TraceJob>& jobs, double total_gpus) {
  if (jobs.empty() || total_gpus <= 0) return 0;
  std::vector<const TraceJob*> by_submit;
  for (const TraceJob& j : jobs) by_submit.push_back(&j);
  std::sort(by_submit.begin(), by_submit.end(),
            [](const TraceJob* a, const TraceJob* b) { return a->submit < b->submit; });
  const double first = by_submit.front()->submit;
  double bound = 0, later_work = 0;
  // From the last submit back: later_work is what was submitted at or after this job's submit.
  for (size_t i = by_submit.size(); i-- > 0;) {
    const TraceJob& j = *by_submit[i];
    later_work += j.duration * j.gpus;
    bound = std::max(bound, j.submit + j.duration - first);
    // Only at the first job of a submit time does later_work hold all of that time's work.
    if (i == 0 || by_submit[i - 1]->submit < j.submit)
      bound = std::max(bound, j.submit - first + later_work / total_gpus);
  }
  return bound;
}

namespace {

// The figures of a finished replay, against the bound no schedule can beat.
void Summarise(const std::vector<TraceJob>& jobs, const Timeline& t, double total_gpus,
               SimulationResult& r) {
  double gpu_seconds = 0;
  for (const TraceJob& j : jobs) gpu_seconds += j.duration * j.gpus;
  std::vector<double> waits, jcts;
  for (size_t i = 0; i < jobs.size(); ++i) {
    waits.push_back(t.start[i] - jobs[i].submit);
    jcts.push_back(t.start[i] + jobs[i].duration - jobs[i].submit);
  }
  r.makespan = t.last_end - t.first_submit;
  r.lower_bound = MakespanLowerBound(jobs, total_gpus);
  r.makespan_ratio = r.makespan / r.lower_bound;
  r.gpu_utilisation = gpu_seconds / (total_gpus * r.makespan);
  r.mean_queueing = Mean(waits);
  r.p95_queueing = Percentile(waits, 0.95);
  r.mean_jct = Mean(jcts);
  r.p95_jct = Percentile(jcts, 0.95);
  std::vector<size_t> by_length(jobs.size());
  for (size_t i = 0; i < by_length.size(); ++i) by_length[i] = i;
  std::sort(by_length.begin(), by_length.end(),
            [&](size_t a, size_t b) { return jobs[a].duration > jobs[b].duration; });
  std::vector<double> longest;
  for (size_t k = 0; k < std::max<size_t>(1, jobs.size() / 10); ++k)
    longest.push_back(waits[by_length[k]]);
  r.p99_queueing_longest = Percentile(longest, 0.99);
  r.passes = static_cast<int>(t.pass_ms.size());
  r.scheduling_seconds = t.scheduling_seconds;
  r.p99_pass_ms = Percentile(t.pass_ms, 0.99);
}

}  // namespace

Result<SimulationResult> Simulate(const std::vector<TraceJob>& jobs, const SimulationOptions& o) {
  std::vector<Node> nodes;
  for (int i = 0; i < o.nodes; ++i)
    nodes.push_back({"node" + std::to_string(i), o.gpus_per_node, 0});
  if (!(o.estimate_noise >= 0) || !(o.queue.aging >= 0) || !(o.queue.max_wait >= 0) ||
      !(o.queue.max_wait_factor >= 0))
    return Status::Invalid("estimate noise, aging, max wait and the guard factor must be >= 0");
  ClusterState cluster(nodes);
  Scheduler scheduler(&cluster, o.policy, o.queue);
  SimulationResult r;
  r.jobs = static_cast<int>(jobs.size());
  if (jobs.empty()) return r;
  HP_ASSIGN_OR_RETURN(const Timeline timeline, Replay(jobs, scheduler, o));
  Summarise(jobs, timeline, static_cast<double>(cluster.total_gpus()), r);
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

std::string SimulationJson(const SimulationResult& r, const SimulationOptions& so) {
  nlohmann::ordered_json j;
  j["jobs"] = r.jobs;
  j["policy"] = PolicyName(so.policy);
  j["order"] = OrderName(so.queue.order);
  j["max_wait"] = so.queue.max_wait;
  j["guard_factor"] = so.queue.max_wait_factor;
  j["critical_first"] = so.queue.critical_first;
  j["estimate_noise"] = so.estimate_noise;
  j["gpus"] = so.nodes * so.gpus_per_node;
  j["gpu_utilisation"] = r.gpu_utilisation;
  j["makespan"] = r.makespan;
  j["lower_bound"] = r.lower_bound;
  j["makespan_ratio"] = r.makespan_ratio;
  j["mean_queueing_delay"] = r.mean_queueing;
  j["p95_queueing_delay"] = r.p95_queueing;
  j["mean_jct"] = r.mean_jct;
  j["p95_jct"] = r.p95_jct;
  j["p99_queueing_delay_longest_tenth"] = r.p99_queueing_longest;
  j["scheduling_passes"] = r.passes;
  j["p99_pass_ms"] = r.p99_pass_ms;
  return j.dump(2);
}

std::string SimulationText(const SimulationResult& r, const SimulationOptions& so) {
  std::ostringstream out;
  out << r.jobs << " jobs on " << so.nodes << " nodes x " << so.gpus_per_node << " GPUs, "
      << PolicyName(so.policy) << ", queue " << OrderName(so.queue.order)
      << (so.queue.max_wait > 0 ? ", max wait " + FormatDuration(so.queue.max_wait)
          : so.queue.max_wait_factor > 0
              ? ", max wait " + FormatShort(so.queue.max_wait_factor, 3) + "x the typical run time"
              : std::string())
      << (so.queue.critical_first ? ", critical jobs first" : "")
      << (so.estimate_noise > 0
              ? ", estimates off by a factor exp(N(0, " + FormatShort(so.estimate_noise, 3) + "))"
              : std::string())
      << "\n"
      << "GPU utilisation      " << FormatShort(100 * r.gpu_utilisation, 4) << "%\n"
      << "makespan             " << FormatDuration(r.makespan) << " ("
      << FormatShort(r.makespan_ratio, 4) << " x the lower bound " << FormatDuration(r.lower_bound)
      << ")\n"
      << "queueing delay       mean " << FormatDuration(r.mean_queueing) << ", p95 "
      << FormatDuration(r.p95_queueing) << ", p99 of the longest tenth "
      << FormatDuration(r.p99_queueing_longest) << "\n"
      << "job completion time  mean " << FormatDuration(r.mean_jct) << ", p95 "
      << FormatDuration(r.p95_jct) << "\n"
      << "scheduling           " << r.passes << " passes, p99 " << FormatShort(r.p99_pass_ms, 3)
      << " ms\n";
  return out.str();
}

}  // namespace hyperpack::scheduler
