// The scheduler's placement code on synthetic workloads, in virtual time.
//
//   scheduler_bench packing [--seeds 5] [--jobs 2000]  policies side by side: makespan against its
//                                                      lower bound, mean JCT, JCT against fifo
//   scheduler_bench scale [--nodes 1000] [--pending 10000]   placements per second and the p99
//                                                      latency of one scheduling pass
//   scheduler_bench queue [--seeds 5] [--jobs 2000] [--noise 0,0.1,0.35,0.7,1] [--aging 1,4]
//                         [--max-wait 0,7200] [--guard-factor 0,6] [--critical 0,1]
//       the tuning workload, best fit with backfill, queued in arrival order or shortest predicted
//       first (each aging rate, each starvation guard in seconds or in multiples of the typical
//       estimate, 0: none; each without and with critical jobs first), with estimates off by
//       exp(N(0, noise)): mean JCT and the p99 wait of the longest tenth against arrival order
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "hyperpack/placement/placement.h"
#include "hyperpack/placement/simulate.h"

namespace hs = hyperpack::scheduler;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Packing(int seeds, int jobs) {
  struct Workload {
    const char* name;
    std::vector<hs::TraceJob> (*make)(int, uint64_t, double);
    double gap;
  };
  // Mean gaps that load a 64 x 8 cluster at about 1.5 (tuning) and 1.2 (shared): a queue forms.
  const Workload workloads[] = {{"tuning", hs::TuningWorkload, 100},
                                {"shared", hs::SharedClusterWorkload, 15}};
  const hs::Policy policies[] = {hs::Policy::kFifo, hs::Policy::kFirstFit, hs::Policy::kBestFit};
  std::printf("%d jobs per workload, 64 nodes x 8 GPUs, median over %d seeds\n\n", jobs, seeds);
  std::printf(
      "| workload | policy | makespan / lower bound | mean JCT (s) | mean JCT vs fifo | "
      "mean queueing (s) | GPU utilisation |\n|---|---|---|---|---|---|---|\n");
  for (const Workload& w : workloads) {
    double fifo_jct = 0;
    for (hs::Policy p : policies) {
      std::vector<double> ratio, jct, wait, util;
      for (int s = 0; s < seeds; ++s) {
        hs::SimulationOptions o;
        o.policy = p;
        auto r = hs::Simulate(w.make(jobs, static_cast<uint64_t>(s + 1), w.gap), o);
        if (!r.ok()) {
          std::cerr << r.status().message() << "\n";
          return 1;
        }
        ratio.push_back(r->makespan_ratio);
        jct.push_back(r->mean_jct);
        wait.push_back(r->mean_queueing);
        util.push_back(r->gpu_utilisation);
      }
      double j = Median(jct);
      if (p == hs::Policy::kFifo) fifo_jct = j;
      std::printf("| %s | %s | %.3f | %.0f | %+.1f%% | %.0f | %.1f%% |\n", w.name,
                  hs::PolicyName(p), Median(ratio), j, 100.0 * (j / fifo_jct - 1.0), Median(wait),
                  100.0 * Median(util));
    }
  }
  return 0;
}

// A queue policy of the Queue table, by the name its row goes by.
struct QueueRow {
  std::string name;
  hs::QueueOptions queue;
};

// Fifo, then shortest-first for each aging with each max wait and each factor of the typical
// run, each without critical jobs first, with them, or both (`criticals`).
std::vector<QueueRow> QueueRows(const std::vector<double>& agings,
                                const std::vector<double>& max_waits,
                                const std::vector<double>& factors,
                                const std::vector<int>& criticals) {
  using Row = QueueRow;
  std::vector<Row> rows = {{"fifo", {}}};
  for (double a : agings) {
    char name[96];
    for (double w : max_waits) {
      if (w > 0)
        std::snprintf(name, sizeof name, "sjf, aging %g, max wait %gh", a, w / 3600);
      else
        std::snprintf(name, sizeof name, "sjf, aging %g", a);
      rows.push_back({name, {hs::Order::kShortestFirst, a, w, 0}});
    }
    for (double f : factors) {
      if (f <= 0) continue;
      std::snprintf(name, sizeof name, "sjf, aging %g, max wait %g x typical", a, f);
      rows.push_back({name, {hs::Order::kShortestFirst, a, 0, f}});
    }
  }
  // Each sjf row without critical jobs first, with them, or both.
  std::vector<Row> sjf(rows.begin() + 1, rows.end());
  rows.resize(1);
  for (const Row& row : sjf)
    for (int c : criticals) {
      Row r = row;
      r.queue.critical_first = c != 0;
      if (c != 0) r.name += ", critical first";
      rows.push_back(r);
    }
  return rows;
}

int Queue(int seeds, int jobs, const std::vector<double>& noises, const std::vector<double>& agings,
          const std::vector<double>& max_waits, const std::vector<double>& factors,
          const std::vector<int>& criticals) {
  const std::vector<QueueRow> rows = QueueRows(agings, max_waits, factors, criticals);
  std::printf(
      "tuning workload, %d jobs, 64 nodes x 8 GPUs, best fit with EASY backfill, median over %d "
      "seeds\n\n",
      jobs, seeds);
  std::printf(
      "| estimate noise (sd of log) | queue | mean JCT (s) | mean JCT vs fifo | makespan / lower "
      "bound | p99 wait, longest tenth (s) | vs fifo |\n|---|---|---|---|---|---|---|\n");
  for (double noise : noises) {
    double fifo_jct = 0, fifo_p99 = 0;
    for (const QueueRow& row : rows) {
      std::vector<double> jct, ratio, p99;
      for (int s = 0; s < seeds; ++s) {
        hs::SimulationOptions o;
        o.queue = row.queue;
        o.estimate_noise = noise;
        o.noise_seed = static_cast<uint64_t>(s + 1);
        auto r = hs::Simulate(hs::TuningWorkload(jobs, static_cast<uint64_t>(s + 1)), o);
        if (!r.ok()) {
          std::cerr << r.status().message() << "\n";
          return 1;
        }
        jct.push_back(r->mean_jct);
        ratio.push_back(r->makespan_ratio);
        p99.push_back(r->p99_queueing_longest);
      }
      const double j = Median(jct), w = Median(p99);
      if (row.queue.order == hs::Order::kArrival) {
        fifo_jct = j;
        fifo_p99 = w;
      }
      std::printf("| %.2f | %s | %.0f | %+.1f%% | %.3f | %.0f | %.2fx |\n", noise, row.name.c_str(),
                  j, 100.0 * (j / fifo_jct - 1.0), Median(ratio), w,
                  fifo_p99 > 0 ? w / fifo_p99 : 0);
    }
  }
  return 0;
}

int Scale(int nodes, int pending) {
  std::vector<hs::Node> cluster;
  for (int i = 0; i < nodes; ++i) cluster.push_back({"n" + std::to_string(i), 8, 0});
  hs::ClusterState state(cluster);
  hs::Scheduler scheduler(&state, hs::Policy::kBestFit);
  std::mt19937_64 rng(1);
  std::discrete_distribution<int> size({40, 30, 20, 10});
  std::lognormal_distribution<double> duration(std::log(1800.0), 1.0);
  const int sizes[] = {1, 2, 4, 8};
  std::vector<double> dur(pending);
  for (int i = 0; i < pending; ++i) {
    hs::Job j;
    j.id = static_cast<uint64_t>(i);
    j.demand = hs::Demand{sizes[size(rng)], 1, 0};
    dur[i] = std::clamp(duration(rng), 60.0, 8 * 3600.0);
    j.estimate = dur[i];
    j.submit = 0;
    if (!scheduler.Submit(j).ok()) return 1;
  }
  using End = std::pair<double, uint64_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  std::vector<double> pass_ms;
  double busy_s = 0, now = 0;
  int placed = 0;
  while (placed < pending) {
    auto t0 = std::chrono::steady_clock::now();
    auto started = scheduler.Schedule(now);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    busy_s += s;
    pass_ms.push_back(1000 * s);
    for (const auto& st : started) ends.push({now + dur[st.job.id], st.job.id});
    placed += static_cast<int>(started.size());
    if (ends.empty()) break;
    now = ends.top().first;
    while (!ends.empty() && ends.top().first <= now) {
      scheduler.Finish(ends.top().second);
      ends.pop();
    }
  }
  std::sort(pass_ms.begin(), pass_ms.end());
  double p99 = pass_ms[static_cast<size_t>(0.99 * static_cast<double>(pass_ms.size() - 1))];
  std::printf(
      "%d nodes x 8 GPUs, %d trials waiting at the start (1/2/4/8 GPUs), best fit with "
      "backfill\n",
      nodes, pending);
  std::printf("placements        %d in %.3f s of scheduling: %.0f placements/s\n", placed, busy_s,
              placed / busy_s);
  std::printf("scheduling passes %zu, p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", pass_ms.size(),
              pass_ms[pass_ms.size() / 2], p99, pass_ms.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  cxxopts::Options o("scheduler_bench", "hyperpack's placement code on synthetic workloads");
  o.add_options()("mode", "packing | scale | queue", cxxopts::value<std::string>())(
      "seeds", "packing: workloads per configuration", cxxopts::value<int>()->default_value("5"))(
      "jobs", "packing: jobs per workload", cxxopts::value<int>()->default_value("2000"))(
      "nodes", "scale: 8-GPU nodes", cxxopts::value<int>()->default_value("1000"))(
      "pending", "scale: waiting trials", cxxopts::value<int>()->default_value("10000"))(
      "aging", "queue: sjf's aging rates",
      cxxopts::value<std::vector<double>>()->default_value("1,4"))(
      "max-wait", "queue: sjf's starvation guards, seconds (0: none)",
      cxxopts::value<std::vector<double>>()->default_value("0"))(
      "guard-factor",
      "queue: sjf's starvation guards as multiples of the typical estimate (0: none)",
      cxxopts::value<std::vector<double>>()->default_value("0"))(
      "critical", "queue: sjf without (0) and with (1) critical jobs first",
      cxxopts::value<std::vector<int>>()->default_value("0"))(
      "noise", "queue: estimate noise levels (sd of log error)",
      cxxopts::value<std::vector<double>>()->default_value("0,0.1,0.35,0.7,1"))("h,help",
                                                                                "this help");
  o.parse_positional({"mode"});
  auto args = o.parse(argc, argv);
  if (args.count("help") || !args.count("mode")) {
    std::cout << o.help();
    return args.count("help") ? 0 : 2;
  }
  std::string mode = args["mode"].as<std::string>();
  if (mode == "packing") return Packing(args["seeds"].as<int>(), args["jobs"].as<int>());
  if (mode == "scale") return Scale(args["nodes"].as<int>(), args["pending"].as<int>());
  if (mode == "queue")
    return Queue(
        args["seeds"].as<int>(), args["jobs"].as<int>(), args["noise"].as<std::vector<double>>(),
        args["aging"].as<std::vector<double>>(), args["max-wait"].as<std::vector<double>>(),
        args["guard-factor"].as<std::vector<double>>(), args["critical"].as<std::vector<int>>());
  std::cerr << "scheduler_bench: mode is packing, scale or queue\n";
  return 2;
}
