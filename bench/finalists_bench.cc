// finalists_bench: the time of study::NextFinalists, which a study with budget.finalists and a time
// or cost budget asks at each event, against the sort of every completed run it replaced, side by
// side on the same runs.
//
//   finalists_bench [--runs 1000,10000,100000] [--n 3] [--calls 200]
//
// Each run is a five-parameter configuration with a uniform value; a tenth repeat an earlier
// configuration. Prints a table: runs, the median over 5 repeats of the mean time per call of
// each, and their ratio; and checks that both choose the same runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <random>
#include <string>
#include <vector>

#include "hyperpack/study/finalists.h"

namespace hyperpack {
namespace {

using study::CompletedRun;

std::vector<CompletedRun> MakeRuns(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<CompletedRun> runs;
  for (int i = 0; i < count; ++i) {
    Config c;
    if (i > 0 && unit(rng) < 0.1) {
      c = runs[static_cast<size_t>(unit(rng) * i)].config;
    } else {
      for (const char* k : {"lr", "batch_size", "momentum", "weight_decay", "width"})
        c[k] = Value{unit(rng)};
    }
    runs.push_back({i, std::move(c), unit(rng), false});
  }
  return runs;
}

// What NextFinalists did before: rank every finite run, take the first n distinct configurations.
std::vector<size_t> BySorting(const std::vector<CompletedRun>& runs,
                              const std::vector<Config>& taken, const study::Objective& objective,
                              int n) {
  std::vector<size_t> order;
  for (size_t i = 0; i < runs.size(); ++i)
    if (std::isfinite(runs[i].value)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return objective.Better(runs[a].value, runs[b].value);
  });
  std::vector<size_t> out;
  std::vector<Config> seen = taken;
  for (size_t i : order) {
    if (static_cast<int>(out.size()) >= n) break;
    if (std::find(seen.begin(), seen.end(), runs[i].config) != seen.end()) continue;
    seen.push_back(runs[i].config);
    out.push_back(i);
  }
  return out;
}

// The median over 5 repeats of the mean milliseconds per call of `f`.
template <typename F>
double MillisPerCall(int calls, F f) {
  std::vector<double> ms;
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) f();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    ms.push_back(took.count() / calls);
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

int Run(const std::vector<int>& sizes, int n, int calls) {
  std::printf("| runs | NextFinalists, ms per call | sorting every run, ms per call | ratio |\n");
  std::printf("|---|---|---|---|\n");
  const study::Objective objective;
  for (int size : sizes) {
    const std::vector<CompletedRun> runs = MakeRuns(size, static_cast<uint64_t>(size));
    const std::vector<Config> taken = {runs.front().config};
    if (study::NextFinalists(runs, taken, objective, n) != BySorting(runs, taken, objective, n)) {
      std::fprintf(stderr, "finalists_bench: the two choose differently at %d runs\n", size);
      return 1;
    }
    size_t sink = 0;
    const double one_pass = MillisPerCall(
        calls, [&] { sink += study::NextFinalists(runs, taken, objective, n).size(); });
    const double sorting =
        MillisPerCall(calls, [&] { sink += BySorting(runs, taken, objective, n).size(); });
    std::printf("| %d | %.4f | %.4f | %.1fx |\n", size, one_pass, sorting, sorting / one_pass);
    if (sink == 0) return 1;  // keeps the calls
  }
  return 0;
}

}  // namespace
}  // namespace hyperpack

int main(int argc, char** argv) {
  cxxopts::Options o("finalists_bench", "study::NextFinalists against sorting every run");
  o.add_options()("runs", "completed runs",
                  cxxopts::value<std::vector<int>>()->default_value("1000,10000,100000"))(
      "n", "finalists left to choose", cxxopts::value<int>()->default_value("3"))(
      "calls", "calls per repeat", cxxopts::value<int>()->default_value("200"))("h,help", "help");
  try {
    cxxopts::ParseResult args = o.parse(argc, argv);
    if (args.count("help")) {
      std::printf("%s", o.help().c_str());
      return 0;
    }
    const int n = args["n"].as<int>(), calls = args["calls"].as<int>();
    const std::vector<int> sizes = args["runs"].as<std::vector<int>>();
    if (n < 1 || calls < 1 || sizes.empty() ||
        std::any_of(sizes.begin(), sizes.end(), [](int s) { return s < 1; })) {
      std::fprintf(stderr, "finalists_bench: --runs, --n and --calls must be positive\n");
      return 2;
    }
    return hyperpack::Run(sizes, n, calls);
  } catch (const cxxopts::exceptions::exception& e) {
    std::fprintf(stderr, "finalists_bench: %s\n", e.what());
    return 2;
  }
}
