// tuner_regret: how quickly a hyperpack tuner finds the minimum of the functions in functions.h.
//
//   tuner_regret --algorithm gp|random|sobol [--functions branin,hartmann6,...] [--seeds 20]
//                [--evals 100] [--batch 1] [--json]
//
// For each function and seed (0 .. seeds-1) it runs the ask/tell loop through MakeTuner:
// Propose(batch) with nothing pending, evaluate every proposal, Observe each, until `evals`
// evaluations; and records the best value so far after each evaluation. It prints, at 25, 50 and
// 100 evaluations (those within the budget) and at the budget itself, the median and quartiles
// over seeds of the simple regret (best so far - global minimum), and the time spent in the tuner.
// --json writes one object per function and checkpoint instead of the table. bench/optuna_regret.py
// prints the same for Optuna; bench/regret.sh puts both side by side.
// Progress goes to stderr, one line per finished seed. Exit status: 0, 1 when a tuner fails, 2 for
// bad flags (an unknown algorithm included).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "functions.h"
#include "hyperpack/table.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Flags {
  std::string algorithm;
  std::vector<std::string> functions;
  int seeds = 20;
  int evals = 100;
  int batch = 1;
  bool json = false;
  std::vector<int> checkpoints = {25, 50, 100};
  int max_fit_points = 0;    // 0: the tuner's default
  int max_model_points = 0;  // 0: the tuner's default
};

// One seed's run: the best value after each evaluation and the time spent in the tuner.
struct Trace {
  std::vector<double> best;
  double propose_s = 0.0;
  double observe_s = 0.0;
  int propose_calls = 0;
};

// The q-quantile of sorted values, interpolating linearly between order statistics (numpy's
// default; optuna_regret.py uses the same rule).
double Quantile(const std::vector<double>& sorted, double q) {
  const double h = (static_cast<double>(sorted.size()) - 1.0) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// A number for a table: integers from 1000 up (no exponent), else `digits` significant digits.
std::string Cell(double x, int digits = 4) {
  if (std::abs(x) >= 1e3 && std::abs(x) < 1e9) return std::to_string(std::llround(x));
  return FormatShort(x, digits);
}

// The requested checkpoints (25, 50 and 100 by default) within the budget, and the budget itself.
std::vector<int> Checkpoints(const std::vector<int>& wanted, int evals) {
  std::vector<int> out;
  for (int c : wanted)
    if (c <= evals) out.push_back(c);
  if (out.empty() || out.back() != evals) out.push_back(evals);
  return out;
}

Result<Trace> RunSeed(const TestFunction& f, const Flags& flags, int seed) {
  tuner::TunerOptions options;
  HP_ASSIGN_OR_RETURN(options.algorithm, tuner::ParseTunerAlgorithm(flags.algorithm));
  options.seed = static_cast<uint64_t>(seed);
  options.maximize = false;
  if (flags.max_fit_points > 0) options.max_fit_points = flags.max_fit_points;
  if (flags.max_model_points > 0) options.max_model_points = flags.max_model_points;
  HP_ASSIGN_OR_RETURN(std::unique_ptr<tuner::Tuner> tuner, tuner::MakeTuner(f.space, options));

  Trace trace;
  double best = std::numeric_limits<double>::infinity();
  while (static_cast<int>(trace.best.size()) < flags.evals) {
    const int done = static_cast<int>(trace.best.size());
    const int n = std::min(flags.batch, flags.evals - done);
    const Clock::time_point t0 = Clock::now();
    Result<std::vector<Config>> proposed = tuner->Propose(n, {});
    trace.propose_s += Seconds(Clock::now() - t0);
    ++trace.propose_calls;
    if (!proposed.ok()) return proposed.status().WithContext(StrCat("Propose after ", done));
    if (proposed->empty() || static_cast<int>(proposed->size()) > n)
      return Status::Internal("Propose(", n, ") returned ", proposed->size(),
                              " configurations after ", done, " evaluations");
    std::vector<double> values;
    for (const Config& config : *proposed) {
      if (Status s = f.space.Validate(config); !s.ok())
        return s.WithContext(StrCat("proposal ", trace.best.size() + 1));
      values.push_back(f.Evaluate(config));
      best = std::min(best, values.back());
      trace.best.push_back(best);
    }
    const Clock::time_point t1 = Clock::now();
    for (size_t i = 0; i < values.size(); ++i) {
      tuner::TrialOutcome outcome;
      outcome.config = (*proposed)[i];
      outcome.kind = tuner::TrialOutcome::Kind::kCompleted;
      outcome.value = values[i];
      tuner->Observe(outcome);
    }
    trace.observe_s += Seconds(Clock::now() - t1);
  }
  return trace;
}

// Runs every seed of one function and prints its rows (JSON) or adds them to `table`.
Status RunFunction(const TestFunction& f, const Flags& flags, Table* table) {
  const std::string impl = "hyperpack-" + flags.algorithm;
  std::vector<std::vector<double>> regrets;  // [seed][evaluation]
  double propose_s = 0.0, observe_s = 0.0;
  int propose_calls = 0;
  for (int seed = 0; seed < flags.seeds; ++seed) {
    const Clock::time_point start = Clock::now();
    Result<Trace> trace = RunSeed(f, flags, seed);
    if (!trace.ok()) return trace.status().WithContext(StrCat(f.name, " seed ", seed));
    std::vector<double> regret;
    for (double b : trace->best) regret.push_back(b - f.f_min);
    propose_s += trace->propose_s;
    observe_s += trace->observe_s;
    propose_calls += trace->propose_calls;
    std::fprintf(stderr, "tuner_regret: %s %s seed %d/%d: regret %s after %d in %.3gs\n",
                 impl.c_str(), f.name.c_str(), seed + 1, flags.seeds, Cell(regret.back()).c_str(),
                 flags.evals, Seconds(Clock::now() - start));
    regrets.push_back(std::move(regret));
  }

  const double propose_mean_s = propose_calls > 0 ? propose_s / propose_calls : 0.0;
  for (int checkpoint : Checkpoints(flags.checkpoints, flags.evals)) {
    std::vector<double> at;
    for (const std::vector<double>& r : regrets) at.push_back(r[checkpoint - 1]);
    std::sort(at.begin(), at.end());
    const double median = Quantile(at, 0.5), q1 = Quantile(at, 0.25), q3 = Quantile(at, 0.75);
    if (flags.json) {
      nlohmann::ordered_json row = {{"impl", impl},
                                    {"function", f.name},
                                    {"batch", flags.batch},
                                    {"evals", checkpoint},
                                    {"seeds", flags.seeds},
                                    {"median", median},
                                    {"q1", q1},
                                    {"q3", q3},
                                    {"budget", flags.evals},
                                    {"propose_total_s", propose_s},
                                    {"propose_mean_s", propose_mean_s},
                                    {"observe_total_s", observe_s}};
      std::cout << row.dump() << std::endl;
    } else {
      table->AddRow({f.name, std::to_string(checkpoint), Cell(median), Cell(q1), Cell(q3),
                     Cell(propose_mean_s * 1e3, 3), Cell(propose_s + observe_s, 3)});
    }
  }
  return Status::Ok();
}

// Parses the command line into `flags`; returns -1 to go on, else the exit code (0 after
// --help, 2 on a usage error, which it prints).
int ParseFlags(int argc, char** argv, Flags* flags) {
  cxxopts::Options options(
      "tuner_regret",
      "Simple regret of a hyperpack tuner on test functions, median and quartiles over seeds");
  options.add_options()("algorithm", "tuner algorithm, as MakeTuner names it (gp, random, sobol)",
                        cxxopts::value<std::string>())(
      "functions", "comma-separated: " + Join(FunctionNames(), ","),
      cxxopts::value<std::vector<std::string>>()->default_value(Join(FunctionNames(), ",")))(
      "seeds", "seeds 0 .. N-1", cxxopts::value<int>()->default_value("20"))(
      "evals", "evaluations per run", cxxopts::value<int>()->default_value("100"))(
      "batch", "configurations per Propose call", cxxopts::value<int>()->default_value("1"))(
      "checkpoints", "evaluation counts to report",
      cxxopts::value<std::vector<int>>()->default_value("25,50,100"))(
      "max-fit-points", "gp: fit hyperparameters on at most this many trials",
      cxxopts::value<int>()->default_value("0"))("max-model-points",
                                                 "gp: keep at most this many trials in the model",
                                                 cxxopts::value<int>()->default_value("0"))(
      "json", "one JSON object per function and checkpoint")("h,help", "this help");
  try {
    cxxopts::ParseResult args = options.parse(argc, argv);
    if (args.count("help")) {
      std::cout << options.help();
      return 0;
    }
    if (!args.count("algorithm")) {
      std::cerr << "tuner_regret: --algorithm is required (e.g. --algorithm sobol)\n";
      return 2;
    }
    flags->algorithm = args["algorithm"].as<std::string>();
    flags->functions = args["functions"].as<std::vector<std::string>>();
    flags->seeds = args["seeds"].as<int>();
    flags->evals = args["evals"].as<int>();
    flags->batch = args["batch"].as<int>();
    flags->json = args.count("json") > 0;
    flags->checkpoints = args["checkpoints"].as<std::vector<int>>();
    flags->max_fit_points = args["max-fit-points"].as<int>();
    flags->max_model_points = args["max-model-points"].as<int>();
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "tuner_regret: " << e.what() << "\n";
    return 2;
  }
  if (flags->seeds < 1 || flags->evals < 1 || flags->batch < 1) {
    std::cerr << "tuner_regret: --seeds, --evals and --batch must be >= 1\n";
    return 2;
  }
  return -1;
}

// The functions the flags name, each checked against the algorithm (an unknown algorithm, or one
// that cannot take a space, is a usage error: all are checked up front); empty after printing
// the error.
std::vector<const TestFunction*> CheckedFunctions(const Flags& flags) {
  std::vector<const TestFunction*> functions;
  for (const std::string& name : flags.functions) {
    const TestFunction* f = FindFunction(name);
    if (f == nullptr) {
      std::cerr << "tuner_regret: --functions: unknown function '" << name << "'; expected one of "
                << Join(FunctionNames(), ", ") << "\n";
      return {};
    }
    functions.push_back(f);
  }
  for (const TestFunction* f : functions) {
    tuner::TunerOptions o;
    auto algorithm = tuner::ParseTunerAlgorithm(flags.algorithm);
    if (algorithm.ok()) o.algorithm = *algorithm;
    if (auto t = algorithm.ok() ? tuner::MakeTuner(f->space, o)
                                : Result<std::unique_ptr<tuner::Tuner>>(algorithm.status());
        !t.ok()) {
      std::cerr << "tuner_regret: --algorithm " << flags.algorithm << " on " << f->name << ": "
                << t.status().message() << "\n";
      return {};
    }
  }
  return functions;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (int code = ParseFlags(argc, argv, &flags); code >= 0) return code;
  const std::vector<const TestFunction*> functions = CheckedFunctions(flags);
  if (functions.empty()) return 2;
  Table table({"function", "evals", "median", "q1", "q3", "ms/propose", "tuner s"});
  for (const TestFunction* f : functions) {
    if (Status s = RunFunction(*f, flags, &table); !s.ok()) {
      std::cerr << "tuner_regret: " << s.message() << "\n";
      return 1;
    }
  }
  if (!flags.json) {
    std::cout << "hyperpack-" << flags.algorithm << ", batch " << flags.batch << ", " << flags.seeds
              << " seeds, " << flags.evals
              << " evaluations: simple regret (best so far - global minimum) over seeds; "
                 "ms/propose is the mean time of one Propose call, tuner s the total time in "
                 "Propose and Observe\n";
    table.Print(std::cout);
  }
  return 0;
}

}  // namespace
}  // namespace hyperpack::bench

int main(int argc, char** argv) { return hyperpack::bench::Main(argc, argv); }
