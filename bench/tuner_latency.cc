// tuner_latency: how long a hyperpack tuner takes to propose once it has seen n trials.
//
//   tuner_latency [--algorithm gp] [--dims 6] [--int-dims 0] [--quantum 0]
//                 [--n 100,300,1000,3000] [--repeats 5] [--batch 1] [--json]
//
// For each n, the data are n random points of [0, 1]^dims (the same for every algorithm and run)
// with values from a smooth function: a random convex quadratic plus sine terms. With --int-dims
// K, the first K dimensions are integers 0..100 (the function sees k / 100), the shape of the
// discrete parameters real studies have. With --quantum Q > 0 the values are rounded to multiples
// of Q, as an accuracy over a finite validation set is, so that they tie: the GP tuner then models
// an objective flat in pieces (the long length-scale prior, the plateau margin and learnt input
// warping). Each repeat builds a fresh tuner (seed = the repeat's index) and Observes the first
// n - 1 points; its first Propose(batch) is timed as the cold call; then Observe(the n-th point)
// + Propose(batch), the step a running study takes each time a trial ends, is timed as the warm
// call. The table shows, over repeats, the median time to observe the n - 1 points, the median
// cold call, and the median and 90th percentile of the warm step. Progress goes to stderr. Exit
// status: 0, 1 when a tuner fails, 2 for bad flags (an unknown algorithm included).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "hyperpack/table.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Linear interpolation between order statistics (numpy's default).
double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double h = (static_cast<double>(values.size()) - 1.0) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

// A number for a table: integers from 1000 up (no exponent), else `digits` significant digits.
std::string Cell(double x, int digits = 4) {
  if (std::abs(x) >= 1e3 && std::abs(x) < 1e9) return std::to_string(std::llround(x));
  return FormatShort(x, digits);
}

// f(x) = sum_ij (x - c)_i H_ij (x - c)_j + sum_i a_i sin(2 pi w_i x_i + p_i), with H = B^T B / d
// + I/2 positive definite; all coefficients drawn once from a fixed seed.
class SmoothFunction {
 public:
  explicit SmoothFunction(int d) : d_(d), c_(d), h_(d * d), a_(d), w_(d), p_(d) {
    std::mt19937_64 rng(20240611);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> b(d * d);
    for (double& v : b) v = normal(rng);
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        double s = 0.0;
        for (int k = 0; k < d; ++k) s += b[k * d + i] * b[k * d + j];
        h_[i * d + j] = s / d + (i == j ? 0.5 : 0.0);
      }
      c_[i] = unit(rng);
      a_[i] = 0.1 + 0.2 * unit(rng);
      w_[i] = 1.0 + 2.0 * unit(rng);
      p_[i] = 2.0 * std::numbers::pi * unit(rng);
    }
  }

  double operator()(const std::vector<double>& x) const {
    double f = 0.0;
    for (int i = 0; i < d_; ++i) {
      for (int j = 0; j < d_; ++j) f += (x[i] - c_[i]) * h_[i * d_ + j] * (x[j] - c_[j]);
      f += a_[i] * std::sin(2.0 * std::numbers::pi * w_[i] * x[i] + p_[i]);
    }
    return f;
  }

 private:
  int d_;
  std::vector<double> c_, h_, a_, w_, p_;
};

// "x1", "x2", ... (appended rather than `"x" + std::to_string(i)`, which trips a false
// -Wrestrict warning in GCC 12 at -O2).
std::string VarName(size_t i) {
  std::string name = "x";
  name += std::to_string(i);
  return name;
}

constexpr int kIntSteps = 100;

SearchSpace UnitCube(int d, int ints) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < d; ++i) {
    ParamSpec p;
    p.name = VarName(i + 1);
    p.type = i < ints ? ParamType::kInt : ParamType::kFloat;
    p.low = 0.0;
    p.high = i < ints ? kIntSteps : 1.0;
    params.push_back(std::move(p));
  }
  return SearchSpace(std::move(params));
}

// n completed trials at random points of the cube.
std::vector<tuner::TrialOutcome> MakeTrials(int d, int ints, double quantum, int n) {
  SmoothFunction f(d);
  std::mt19937_64 rng(7 + static_cast<uint64_t>(n));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<tuner::TrialOutcome> trials;
  for (int t = 0; t < n; ++t) {
    std::vector<double> x(d);
    tuner::TrialOutcome outcome;
    for (int i = 0; i < d; ++i) {
      x[i] = unit(rng);
      if (i < ints) {
        const auto k = static_cast<int64_t>(std::lround(x[i] * kIntSteps));
        x[i] = static_cast<double>(k) / kIntSteps;
        outcome.config[VarName(i + 1)] = k;
      } else {
        outcome.config[VarName(i + 1)] = x[i];
      }
    }
    outcome.kind = tuner::TrialOutcome::Kind::kCompleted;
    outcome.value = quantum > 0 ? quantum * std::round(f(x) / quantum) : f(x);
    trials.push_back(std::move(outcome));
  }
  return trials;
}

struct Timings {
  std::vector<double> setup_ms, cold_ms, warm_ms;
};

Status TimeOne(const SearchSpace& space, const std::string& algorithm, int n, int batch, int repeat,
               const std::vector<tuner::TrialOutcome>& trials, Timings* out) {
  tuner::TunerOptions options;
  HP_ASSIGN_OR_RETURN(options.algorithm, tuner::ParseTunerAlgorithm(algorithm));
  options.seed = static_cast<uint64_t>(repeat);
  options.maximize = false;
  HP_ASSIGN_OR_RETURN(std::unique_ptr<tuner::Tuner> tuner, tuner::MakeTuner(space, options));

  Clock::time_point t0 = Clock::now();
  for (int t = 0; t + 1 < n; ++t) tuner->Observe(trials[t]);
  out->setup_ms.push_back(Ms(Clock::now() - t0));

  t0 = Clock::now();
  Result<std::vector<Config>> cold = tuner->Propose(batch, {});
  out->cold_ms.push_back(Ms(Clock::now() - t0));
  if (!cold.ok()) return cold.status().WithContext("cold Propose");

  t0 = Clock::now();
  tuner->Observe(trials[n - 1]);
  Result<std::vector<Config>> warm = tuner->Propose(batch, {});
  out->warm_ms.push_back(Ms(Clock::now() - t0));
  if (!warm.ok()) return warm.status().WithContext("warm Propose");
  if (static_cast<int>(warm->size()) != batch)
    return Status::Internal("Propose(", batch, ") returned ", warm->size(), " configurations");
  return Status::Ok();
}

struct Flags {
  std::string algorithm;
  int dims = 0, int_dims = 0, repeats = 0, batch = 0;
  double quantum = 0;
  std::vector<int> ns;
  bool json = false;
};

// Parses the command line into `flags`; returns -1 to go on, else the exit code (0 after
// --help, 2 on a usage error, which it prints).
int ParseFlags(int argc, char** argv, Flags* flags) {
  cxxopts::Options options(
      "tuner_latency", "Time of Observe + Propose for a hyperpack tuner that has seen n trials");
  options.add_options()("algorithm", "tuner algorithm, as MakeTuner names it",
                        cxxopts::value<std::string>()->default_value("gp"))(
      "dims", "dimensions of the [0, 1]^d float space", cxxopts::value<int>()->default_value("6"))(
      "int-dims", "of those, how many are integers 0..100",
      cxxopts::value<int>()->default_value("0"))(
      "quantum", "round the values to multiples of this (0: as they are)",
      cxxopts::value<double>()->default_value("0"))(
      "n", "comma-separated numbers of observed trials (also --n)",
      cxxopts::value<std::vector<int>>()->default_value("100,300,1000,3000"))(
      "repeats", "fresh tuners per n", cxxopts::value<int>()->default_value("5"))(
      "batch", "configurations per Propose call", cxxopts::value<int>()->default_value("1"))(
      "json", "one JSON object per n")("h,help", "this help");
  // cxxopts takes one-letter names as short options only: read "--n X" and "--n=X" as "-n X".
  std::vector<std::string> words(argv, argv + argc);
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "--n") words[i] = "-n";
    if (words[i].starts_with("--n=")) words[i].replace(0, 4, "-n");
  }
  std::vector<char*> word_ptrs;
  for (std::string& w : words) word_ptrs.push_back(w.data());
  try {
    cxxopts::ParseResult args = options.parse(static_cast<int>(word_ptrs.size()), word_ptrs.data());
    if (args.count("help")) {
      std::cout << options.help();
      return 0;
    }
    flags->algorithm = args["algorithm"].as<std::string>();
    flags->dims = args["dims"].as<int>();
    flags->int_dims = args["int-dims"].as<int>();
    flags->quantum = args["quantum"].as<double>();
    flags->ns = args["n"].as<std::vector<int>>();
    flags->repeats = args["repeats"].as<int>();
    flags->batch = args["batch"].as<int>();
    flags->json = args.count("json") > 0;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "tuner_latency: " << e.what() << "\n";
    return 2;
  }
  const Flags& f = *flags;
  if (f.dims < 1 || f.repeats < 1 || f.batch < 1 || f.ns.empty() || f.int_dims < 0 ||
      f.int_dims > f.dims || !(f.quantum >= 0) ||
      std::any_of(f.ns.begin(), f.ns.end(), [](int n) { return n < 1; })) {
    std::cerr << "tuner_latency: --dims, --repeats, --batch and every --n must be >= 1, and "
                 "--int-dims in [0, --dims], --quantum >= 0\n";
    return 2;
  }
  return -1;
}

// Times `flags.repeats` fresh tuners at n trials and prints the row (JSON) or adds it to
// `table`.
Status RunN(const SearchSpace& space, const Flags& flags, int n, Table* table) {
  const std::vector<tuner::TrialOutcome> trials =
      MakeTrials(flags.dims, flags.int_dims, flags.quantum, n);
  Timings timings;
  for (int r = 0; r < flags.repeats; ++r) {
    if (Status s = TimeOne(space, flags.algorithm, n, flags.batch, r, trials, &timings); !s.ok())
      return s.WithContext(StrCat("n=", n, " repeat ", r));
    std::fprintf(stderr,
                 "tuner_latency: %s n=%d repeat %d/%d: observe %.3g ms, cold %.3g ms, warm "
                 "%.3g ms\n",
                 flags.algorithm.c_str(), n, r + 1, flags.repeats, timings.setup_ms.back(),
                 timings.cold_ms.back(), timings.warm_ms.back());
  }
  const double setup = Quantile(timings.setup_ms, 0.5);
  const double cold = Quantile(timings.cold_ms, 0.5);
  const double median = Quantile(timings.warm_ms, 0.5);
  const double p90 = Quantile(timings.warm_ms, 0.9);
  if (flags.json) {
    nlohmann::ordered_json row = {{"impl", "hyperpack-" + flags.algorithm},
                                  {"dims", flags.dims},
                                  {"n", n},
                                  {"batch", flags.batch},
                                  {"repeats", flags.repeats},
                                  {"observe_setup_ms", setup},
                                  {"cold_ms", cold},
                                  {"warm_median_ms", median},
                                  {"warm_p90_ms", p90}};
    std::cout << row.dump() << std::endl;
  } else {
    table->AddRow(
        {std::to_string(n), Cell(setup, 3), Cell(cold, 3), Cell(median, 3), Cell(p90, 3)});
  }
  return Status::Ok();
}

int Main(int argc, char** argv) {
  Flags flags;
  if (int code = ParseFlags(argc, argv, &flags); code >= 0) return code;
  const SearchSpace space = UnitCube(flags.dims, flags.int_dims);
  {
    tuner::TunerOptions o;
    auto parsed = tuner::ParseTunerAlgorithm(flags.algorithm);
    if (parsed.ok()) o.algorithm = *parsed;
    if (auto t = parsed.ok() ? tuner::MakeTuner(space, o)
                             : Result<std::unique_ptr<tuner::Tuner>>(parsed.status());
        !t.ok()) {
      std::cerr << "tuner_latency: --algorithm " << flags.algorithm << ": " << t.status().message()
                << "\n";
      return 2;
    }
  }
  Table table({"n", "observe n-1 ms", "cold propose ms", "warm median ms", "warm p90 ms"});
  for (int n : flags.ns) {
    if (Status s = RunN(space, flags, n, &table); !s.ok()) {
      std::cerr << "tuner_latency: " << s.message() << "\n";
      return 1;
    }
  }
  if (!flags.json) {
    std::cout << "hyperpack-" << flags.algorithm << ", " << flags.dims << "-d, batch "
              << flags.batch << ", " << flags.repeats
              << " repeats: warm = Observe(one more trial) + Propose, as in a running study; "
                 "cold = the first Propose after observing n-1 trials (medians; p90 over "
                 "repeats)\n";
    table.Print(std::cout);
  }
  return 0;
}

}  // namespace
}  // namespace hyperpack::bench

int main(int argc, char** argv) { return hyperpack::bench::Main(argc, argv); }
