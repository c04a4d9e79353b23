// What hyperpack adds per trial on Slurm, against plain sbatch on the same one-node cluster (the
// tests' local Slurm, started here): N trivial trials with K in flight, as
//   plain:     N `sbatch --wrap` jobs, at most K queued or running, each followed by squeue
//              every 0.1 s (a tight loop a script would write);
//   hyperpack: `hyperpack run` of a study with cluster.slurm and max_parallel K (its default poll
//              interval of 2 s, and 0.5 s).
// Each configuration is run `repeats` times, alternating; the medians and their ratio are printed
// as a table and as JSON.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "local_slurm.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int Shell(const std::string& command) {
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

std::string Capture(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// Jobs of this user whose name starts with `prefix` that are not finished.
int Live(const std::string& prefix) {
  std::istringstream in(Capture("squeue --noheader --format='%j %T' 2>/dev/null"));
  int live = 0;
  for (std::string name, state; in >> name >> state;)
    if (name.rfind(prefix, 0) == 0 && state != "COMPLETED") ++live;
  return live;
}

double Plain(int n, int k, int round) {
  const std::string prefix = "plain" + std::to_string(round) + "-";
  const auto start = Clock::now();
  int submitted = 0;
  while (submitted < n || Live(prefix) > 0) {
    if (submitted < n && Live(prefix) < k) {
      Shell("sbatch --quiet --cpus-per-task=1 --mem=100M --output=/dev/null --job-name=" + prefix +
            std::to_string(submitted) + " --wrap='echo {\"loss\": 1}'");
      ++submitted;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Hyperpack(const std::string& cli, const std::string& dir, int n, int k, double poll,
                 int round) {
  const std::string name = "bench" + std::to_string(round);
  const std::string study = dir + "/" + name + ".yaml";
  std::ofstream(study) << "name: " << name << "\n"
                       << "objective: {metric: loss, direction: minimize}\n"
                       << "search_space: {x: {type: float, low: 0, high: 1}}\n"
                       << "trial: {command: \"echo '{{\\\"loss\\\": {x}}}'\"}\n"
                       << "tuner: {algorithm: random, seed: " << round << "}\n"
                       << "budget: {max_trials: " << n << ", max_parallel: " << k << "}\n"
                       << "resources: {cpus: 1}\n"
                       << "cluster: {slurm: {mem: 100M, poll_interval: " << poll << "s}}\n";
  const auto start = Clock::now();
  const int rc = Shell(cli + " run " + study + " --storage " + dir + "/bench.db --log-dir " + dir +
                       "/logs --progress quiet > /dev/null");
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (rc != 0) std::cerr << "hyperpack run exited " << rc << "\n";
  return took;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: slurm_overhead HYPERPACK [TRIALS=16] [REPEATS=3]\n";
    return 2;
  }
  const std::string cli = fs::absolute(argv[1]).string();
  const int n = argc > 2 ? std::atoi(argv[2]) : 16;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  std::string error;
  auto cluster = hyperpack::testing::LocalSlurm::Start({}, &error);
  if (!cluster) {
    std::cerr << "the local Slurm did not start: " << error << "\n";
    return 1;
  }
  setenv("SLURM_CONF", cluster->conf().c_str(), 1);
  const std::string dir = cluster->dir() + "/bench";
  fs::create_directories(dir);
  struct Row {
    int k;
    std::vector<double> plain, hp2, hp05;
  };
  std::vector<Row> rows = {{2, {}, {}, {}}, {n, {}, {}, {}}};
  int round = 0;
  for (int r = 0; r < repeats; ++r) {
    for (Row& row : rows) {
      row.plain.push_back(Plain(n, row.k, ++round));
      row.hp2.push_back(Hyperpack(cli, dir, n, row.k, 2, ++round));
      row.hp05.push_back(Hyperpack(cli, dir, n, row.k, 0.5, ++round));
      std::cerr << "repeat " << r + 1 << "/" << repeats << ", " << row.k << " in flight: plain "
                << row.plain.back() << " s, hyperpack " << row.hp2.back() << " s (poll 2 s), "
                << row.hp05.back() << " s (poll 0.5 s)\n";
    }
  }
  std::printf("%d trivial trials on a one-node Slurm (%d CPUs), median of %d\n", n, cluster->cpus(),
              repeats);
  std::printf("%-10s %10s %16s %18s %16s %18s\n", "in flight", "plain s", "hyperpack(2s) s",
              "overhead/trial s", "hyperpack(0.5s) s", "overhead/trial s");
  std::string json = "[";
  for (const Row& row : rows) {
    const double p = Median(row.plain), h2 = Median(row.hp2), h05 = Median(row.hp05);
    std::printf("%-10d %10.2f %16.2f %18.3f %16.2f %18.3f\n", row.k, p, h2, (h2 - p) / n, h05,
                (h05 - p) / n);
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "%s{\"in_flight\": %d, \"plain_s\": %.3f, \"hyperpack_poll2_s\": %.3f, "
                  "\"hyperpack_poll05_s\": %.3f}",
                  json.size() > 1 ? ", " : "", row.k, p, h2, h05);
    json += buf;
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}
