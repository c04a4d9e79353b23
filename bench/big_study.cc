// big_study: writes a study of many trials straight through the Storage interface, for timing the
// read commands at a scale no test run reaches (bench/read_at_scale.sh).
//
//   big_study --storage URL [--name big] [--trials 100000] [--running 8] [--points 0] [--seed 1]
//
// The study file is a three-parameter space (lr, batch_size, optimizer); every trial but the
// `--running` last ones has ended: 70% completed with a value, 20% pruned, 10% failed. Each running
// trial has `--points` metric points (steps 1..points). Rows go in transactions of 1,000. Prints
// one JSON line: what it wrote and how long that took.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <random>
#include <string>
#include <vector>

#include "hyperpack/storage/storage.h"

namespace hyperpack {
namespace {

constexpr char kSpec[] = R"(name: big
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 1.0e-5, high: 0.1, log: true}
  batch_size: {type: int, low: 16, high: 512, log: true}
  optimizer: {type: categorical, values: [sgd, adam, adamw]}
trial: {command: "true"}
budget: {max_trials: 200000, max_parallel: 8}
)";

struct Options {
  std::string storage, name;
  int trials = 0, running = 0, points = 0;
  uint64_t seed = 1;
};

storage::TrialRecord NewTrial(int64_t study, int number, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  storage::TrialRecord t;
  t.study_id = study;
  t.number = number;
  t.state = storage::TrialState::kRunning;
  const double lr = std::pow(10.0, -5 + 4 * unit(rng));
  t.params = {{"lr", lr},
              {"batch_size", static_cast<int64_t>(16 << static_cast<int>(unit(rng) * 5))},
              {"optimizer", std::vector<std::string>{"sgd", "adam", "adamw"}[number % 3]}};
  t.started = 1.7e9 + number * 10.0;
  t.host = "node" + std::to_string(number % 8);
  t.placement = {{t.host, {number % 8}, 1}};
  return t;
}

// Ends `t` the way the mix says: completed, pruned or failed.
void End(storage::TrialRecord* t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  const double u = unit(rng);
  t->ended = *t->started + 5 + 100 * unit(rng);
  t->exit_status = 0;
  if (u < 0.7) {
    t->state = storage::TrialState::kCompleted;
    t->value = 0.1 + unit(rng);
  } else if (u < 0.9) {
    t->state = storage::TrialState::kPruned;
    t->value = 1 + unit(rng);
  } else {
    t->state = storage::TrialState::kFailed;
    t->exit_status = 1;
    t->error = "exited 1";
  }
}

Status Write(const Options& o) {
  HP_ASSIGN_OR_RETURN(auto db, storage::OpenStorage(o.storage));
  storage::StudyRecord s;
  s.name = o.name;
  s.spec_text = kSpec;
  s.spec_path = "big.yaml";
  s.metric = "loss";
  s.seed = o.seed;
  s.created = 1.7e9;
  HP_ASSIGN_OR_RETURN(s, db->CreateStudy(s));
  std::mt19937_64 rng(o.seed);
  constexpr int kBatch = 1000;
  for (int from = 0; from < o.trials; from += kBatch) {
    HP_RETURN_IF_ERROR(db->Transaction([&]() -> Status {
      for (int n = from; n < std::min(o.trials, from + kBatch); ++n) {
        storage::TrialRecord t = NewTrial(s.id, n, rng);
        HP_RETURN_IF_ERROR(db->InsertTrial(t));
        if (n >= o.trials - o.running) continue;
        End(&t, rng);
        HP_RETURN_IF_ERROR(db->FinishTrial(t));
      }
      return Status::Ok();
    }));
  }
  for (int n = std::max(0, o.trials - o.running); n < o.trials; ++n) {
    for (int from = 1; from <= o.points; from += kBatch) {
      std::vector<storage::MetricPoint> points;
      for (int step = from; step <= std::min(o.points, from + kBatch - 1); ++step)
        points.push_back({step, "loss", 1.0 / step, 1.7e9 + n * 10.0 + step});
      HP_RETURN_IF_ERROR(db->AddMetrics(s.id, n, points));
    }
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  cxxopts::Options cli("big_study", "writes a study of many trials, for timing the read commands");
  Options o;
  cli.add_options()("storage", "storage URL or path", cxxopts::value(o.storage))(
      "name", "study name", cxxopts::value(o.name)->default_value("big"))(
      "trials", "trials", cxxopts::value(o.trials)->default_value("100000"))(
      "running", "trials left running (the last ones)",
      cxxopts::value(o.running)->default_value("8"))("points",
                                                     "metric points of each running trial",
                                                     cxxopts::value(o.points)->default_value("0"))(
      "seed", "random seed", cxxopts::value(o.seed)->default_value("1"));
  try {
    cli.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "big_study: %s\n", e.what());
    return 2;
  }
  if (o.storage.empty() || o.trials < 1 || o.running < 0 || o.running > o.trials || o.points < 0) {
    std::fprintf(stderr, "big_study: give --storage, --trials >= 1, 0 <= --running <= --trials\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = Write(o);
  if (!s.ok()) {
    std::fprintf(stderr, "big_study: %s\n", s.message().c_str());
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"trials\": %d, \"running\": %d, \"points\": %d, \"seconds\": %.2f}\n", o.trials,
              o.running, o.points, seconds);
  return 0;
}

}  // namespace
}  // namespace hyperpack

int main(int argc, char** argv) { return hyperpack::Main(argc, argv); }
