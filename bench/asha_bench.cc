// asha_bench: early stopping (ASHA, Hyperband, median) against full training, on synthetic
// learning curves or on a table of real ones, in virtual time.
//
//   asha_bench [--seeds 20] [--methods gp+asha,gp,random,...] [--budget-trials 40]
//              [--target-gap 0.02] [--cluster 1x8|2x4] [--speedup 0] [--learn-ladder=false]
//              [--threads 1] [--precision] [--table bench/data/lc_FAMILY.json] [--start-cost S]
//              [--repeats bench/data/lc_FAMILY.repeats.json]
//              [--fresh-draws [--draw-curves[=bench/data/lc_FAMILY.curves.json]] [--rotate-draws]]
//              [--model-choice]
//              [--json runs.json]
//
// Every method runs the code that ships, on the same seeds: a study file (StudyText below) parsed
// by study::ParseStudy, the tuner that `hyperpack run` would make from it, and the study controller
// (scheduler/run/study_controller.h) driven in virtual time by VirtualDriver on a simulated
// cluster of 8 GPUs (one node of 8, or two of 4). Only the training runs are simulated (Workload
// below); every decision is the controller's: placement (best fit with backfill, estimating a job
// by the median duration of the trials completed so far), the pruner and its pauses and
// promotions, what the tuner learns, and when to ask it for more. Promoted trials are queued first
// (priority 2); new configurations are asked for only while nothing waits for room, as many at once
// as there are free trial slots (max_parallel = 8 trials, whatever their GPUs), with the running
// and queued ones pending. Time is an event queue, so a seed of a three-hour study takes a fraction
// of a second plus the time spent in the tuner. A run ends at the budget: 8 GPUs for as long as
// `--budget-trials` (40) full-length trials of the average configuration of the space take, in
// GPU-seconds; about 2.8 hours of virtual time. The study's budget.time_limit is that time, so the
// controller stops launching there; the driver cuts the run off at the same moment.
//
// The objective (to minimise): the validation loss of a made-up training run, 10 classes (the
// loss starts at ln 10 = 2.3), reported after every epoch, at most 27 epochs.
//   search space  lr             float, log scale, [1e-4, 1]
//                 batch_size     int, log scale, [32, 1024] (the global batch)
//                 momentum       float, [0.5, 0.99]
//                 weight_decay   float, log scale, [1e-6, 1e-2]
//                 data_parallel  categorical {1, 2, 4}: GPUs (ranks) per trial
//   effective lr  lr_eff = lr * 0.1 / (1 - momentum)   (SGD's step with momentum; = lr at 0.9)
//   optimal lr    lr* = 0.05 * batch_size / 128          (the linear scaling rule)
//                 q = log10(lr_eff / lr*)
//   plateau       L_inf = 0.08 + 0.25 q^2 + 0.015 (log10(weight_decay) + 4)^2
//                         + 0.02 max(0, log2(batch_size / 256))   (large batches generalise worse)
//                         + a per-trial offset, normal with sd 0.005 (the initialisation)
//   speed         tau = 3 * 10^(-q) epochs for q < 0 (too small a step: slow), 3 epochs for
//                 q >= 0; with --speedup s, 3 * 10^(-s q) for q >= 0: a larger step then also
//                 converges faster, to a worse plateau, so that it looks better at the low rungs
//                 than it ends (the low-fidelity bias that hurts early stopping)
//   curve         L(e) = L_inf + (2.3 - L_inf) exp(-e / tau)
//   divergence    when lr_eff > 4 lr* (q > 0.6) the run follows L(e) until epoch
//                 e_div = max(0.5, 6 (1 - (q - 0.6) / 0.6)), then climbs back towards 2.3 with a
//                 time constant of 1 epoch: the further past the limit, the sooner it blows up;
//                 a run a little past it looks like a good one at the first rungs.
//   reported      L(e) + noise, normal with sd 0.01 (a finite validation set), fresh every epoch.
//   epoch time    60 s * (0.5 + 64 / batch_size) / (dp * 0.9^log2(dp)) for dp = data_parallel
//                 (small batches are slow; each doubling of GPUs is 90% efficient), 25% slower when
//                 a gang spans two nodes; every job start (new, or resumed from a checkpoint) costs
//                 30 s more.
// With --precision the space gains precision {fp32, bf16}: bf16 changes no loss and halves the
// epoch time (a GPU's tensor cores), a parameter that only costs. The budget stays the one without
// it.
// The noise is seeded by the benchmark seed and the configuration (and the epoch), so that two
// methods that try the same configuration on the same seed see the same curve.
//
// With --table (bench/curve_table.h) the curves are real ones recorded by bench/lc_table.py: the
// study's space is the table's, a trial takes one GPU, each proposal is served by the curve of
// the table's nearest configuration (its validation error as `loss`, every epoch charged its
// recorded seconds), a job start costs a tenth of a full run's mean unless --start-cost says
// otherwise, the target is the table's best final error plus --target-gap, and the budget counts
// full runs of the table's mean length. --precision and --speedup do not apply.
//
// A simulated trial does what hyperpack-trainer does: it reads its parameters from the launch
// plan, continues from the epochs it trained before when the plan resumes it, trains to
// HYPERPACK_STOP_AT epochs when the controller sets it (promote mode) or else to 27, prints
// {"epoch": e, "step": e, "loss": ...} after every epoch and then exits 0; the controller stops
// it (SIGTERM) when the pruner pauses or prunes it at a report.
//
// Methods: gp+asha (GP tuner, ASHA promote: trials train to a rung and pause until they rank in
// the top 1/3 there), gp+asha-stop (ASHA stop mode), gp+hyperband (promote mode), gp+median, gp
// (pruner none: every trial trained to 27 epochs), random+asha, random. Rungs 1, 3, 9, 27 epochs
// (eta 3); the median pruner with its defaults (5 completed trials before it stops any, no
// warm-up). The controller teaches the tuner every trial's value at 1, 3 and 9 epochs (the first
// bracket's ladder) as a pruned outcome at that resource (the GP then models the highest rung with
// enough values: BOHB's rule), whether the trial continues, pauses or stops; a trial the median
// pruner stops, at the step where it stopped (one it stops at its 27th report is pruned, not
// completed); a trial that exits 0 after 27 epochs, as completed.
// With --learn-ladder=false (ControllerOptions::learn_ladder) only the values the pruner records
// at the rungs of the trial's own bracket are learnt (Hyperband's later brackets have no rung at
// 1 or 3 epochs).
// A method's name with ":aN" (gp+forecast:a3) runs its study with objective strategy last-N-avg:
// a trial's value, as the pruner judges it and the best is chosen by, is the mean of its last N
// reports. A method's name with ":fK" (gp+forecast:f3) runs its study with budget.finalists K:
// the K best configurations trained again at the end, the best chosen by the mean of their runs.
// With --table a finalist is served its configuration's curve moved to end at the repeats file's
// first other seed (--repeats, or the table's own beside it), and a third run of it (the slots a
// time limit would leave idle) at the second. With --fresh-draws every trial a configuration serves
// after its first, finalist or not, is served its next draw (the table's own, the first other seed,
// the second, around again) at its last epoch, its epochs before being the table's: a proposal
// nearest a served configuration is a new training, whose draw a real one would not share. With
// --draw-curves too, the draws after the table's own are two other seeds' whole curves
// (lc_table.py repeats --curves; bench/data/lc_FAMILY.curves.json), so that a pruner sees another
// training's curve, not the table's ending elsewhere. With --rotate-draws the draw a configuration
// is first served turns with the seed, (seed + configuration) mod 3, the later ones after it.
// A method's name with ":rK" (gp+forecast:r5) runs its study with budget.rerun_top K: from the 8th
// completion each configuration among the K best single runs trains again as it ranks (served its
// next draw, as a finalist is), and its choice at the end is the model's, as `hyperpack best` names
// it for such a study (tuner::RecommendByModel over every completion; the best single run where
// the re-runs returned their first runs' values exactly, study::Repeats).
// With --model-choice each run is written to --json twice, the second as "NAME~model": its choice
// at the end is the configuration tuner::RecommendByModel recommends from its completions (the
// best posterior mean of a noise-fitting GP among its 5 best configurations), the rest the same.
// --json keeps each run's choice after every completion (study::ChooseBest), which
// bench/lc_optuna.py table judges by the seeds after those two.
//
// Measured per seed, and summarised by the median and quartiles over seeds:
//   time to target   the virtual time at which a trial first *completes 27 epochs* (its process
//                    exits 0 after reporting epoch 27, and the controller records it completed)
//                    with a true (noise-free) loss at 27 epochs within --target-gap (0.02) of the
//                    global optimum of that loss; a low-fidelity value never counts, so pruning
//                    cannot win on early noise. A seed that never gets there counts as
//                    infinitely late.
//   proposed at      when the tuner proposed the trial that first reached the target: the rest of
//                    the time to target is its waits for room, its own training and, in promote
//                    mode, its waits to be promoted.
//   best at budget   the lowest true loss at 27 epochs among the trials that completed 27 epochs
//                    before the budget ran out.
//   trials           configurations started; trained to 27: trials completed.
//   GPUs busy        GPU-seconds from each start to its end (trials running at the budget count
//                    to it), over 8 GPUs x the budget.
//   tuner s/run      real seconds in the tuner's Propose and Observe (VirtualDriver measures it).
// The table goes to stdout (markdown), progress to stderr, one line per method and seed.
// Exit status: 0, 1 when a study does not parse or a tuner, pruner or the controller fails, 2 for
// bad flags.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cxxopts.hpp>
#include <deque>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "curve_table.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/scheduler/virtual_driver.h"
#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/finalists.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/recommend.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::bench {
namespace {

namespace hs = hyperpack::scheduler;
namespace ht = hyperpack::tuner;
using Clock = std::chrono::steady_clock;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- The synthetic training run -------------------------------------------------------------

constexpr double kLossStart = 2.3;   // ln(10): a 10-class classifier at chance
constexpr double kLossFloor = 0.08;  // the plateau at the best configuration
constexpr double kTau = 3.0;         // epochs, at the optimal learning rate
constexpr double kDivergeQ = 0.60;   // log10(4): lr_eff more than 4x the optimum diverges
constexpr double kOffsetSd = 0.005;  // per trial
constexpr double kNoiseSd = 0.01;    // per report
constexpr double kEpochBase = 60.0;  // seconds per epoch at batch 128 on one GPU
constexpr double kDpEfficiency = 0.9;
constexpr double kSpanPenalty = 1.25;
constexpr int kCpusPerRank = 4;    // CPU slots per rank (32 per 8-GPU node)
constexpr double kBf16Time = 0.5;  // --precision: a bf16 epoch's time, as a share of fp32's

struct Hp {
  double lr = 0, batch = 0, momentum = 0, weight_decay = 0;
  int dp = 1;
  bool bf16 = false;
};

double Number(const Config& c, const std::string& name) {
  auto it = c.find(name);
  return it == c.end() ? 0.0 : ValueAsNumber(it->second).value_or(0.0);
}

Hp FromConfig(const Config& c) {
  auto precision = c.find("precision");
  const bool bf16 = precision != c.end() && precision->second == Value(std::string("bf16"));
  return Hp{Number(c, "lr"),
            Number(c, "batch_size"),
            Number(c, "momentum"),
            Number(c, "weight_decay"),
            static_cast<int>(Number(c, "data_parallel")),
            bf16};
}

// log10(lr_eff / lr*).
double LrExcess(const Hp& h) {
  const double lr_eff = h.lr * 0.1 / (1.0 - h.momentum);
  const double lr_star = 0.05 * h.batch / 128.0;
  return std::log10(lr_eff / lr_star);
}

// The noise-free validation loss after `epoch` epochs; `offset` is the trial's own. `speedup`:
// how much faster than kTau a learning rate above the optimum converges, tau = kTau *
// 10^(-speedup * q) for q > 0 (0: not at all).
double TrueLoss(const Hp& h, double epoch, double offset, double speedup) {
  const double q = LrExcess(h);
  const double wd = std::log10(h.weight_decay) + 4.0;
  double plateau = kLossFloor + 0.25 * q * q + 0.015 * wd * wd +
                   0.02 * std::max(0.0, std::log2(h.batch / 256.0)) + offset;
  plateau = std::min(plateau, kLossStart);
  const double tau = kTau * std::pow(10.0, q < 0 ? -q : -speedup * q);
  auto curve = [&](double e) { return plateau + (kLossStart - plateau) * std::exp(-e / tau); };
  if (q <= kDivergeQ) return curve(epoch);
  const double e_div = std::max(0.5, 6.0 * (1.0 - (q - kDivergeQ) / 0.6));
  if (epoch <= e_div) return curve(epoch);
  const double at = curve(e_div);
  return kLossStart - (kLossStart - at) * std::exp(-(epoch - e_div));
}

double EpochSeconds(const Hp& h, bool spans_nodes) {
  const double dp = h.dp;
  const double speedup = dp * std::pow(kDpEfficiency, std::log2(dp));
  return kEpochBase * (0.5 + 64.0 / h.batch) / speedup * (spans_nodes ? kSpanPenalty : 1.0) *
         (h.bf16 ? kBf16Time : 1.0);
}

uint64_t Mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t ConfigHash(const Config& c) {  // FNV-1a over "name=value;" in name order
  uint64_t h = 1469598103934665603ULL;
  for (const auto& [name, value] : c) {
    for (char ch : name + "=" + FormatValue(value) + ";") {
      h ^= static_cast<unsigned char>(ch);
      h *= 1099511628211ULL;
    }
  }
  return h;
}

// A standard normal draw determined by `key` (Box-Muller on two hashed uniforms).
double Normal(uint64_t key) {
  const uint64_t a = Mix64(key), b = Mix64(a ^ 0x5851f42d4c957f2dULL);
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// The lowest noise-free loss at `epochs` over the space (offset 0): the plateau terms other than
// q's vanish at weight decay 1e-4 and batch <= 256, and q is searched on a fine grid (a slightly
// large lr converges a little faster, so the optimum sits just above q = 0).
double GlobalOptimum(double epochs, double speedup) {
  double best = kInf;
  for (int i = -5000; i <= 5000; ++i) {
    const double q = i * 1e-4;
    Hp h{0.05 * std::pow(10.0, q), 128, 0.9, 1e-4, 1};
    best = std::min(best, TrueLoss(h, epochs, 0.0, speedup));
  }
  return best;
}

// GPU-seconds of one full-length trial, averaged over the space as the random sampler draws it
// (log-uniform batch, uniform data_parallel), on one node.
double MeanFullTrialGpuSeconds(double epochs, double overhead) {
  // E[1/batch] for batch log-uniform on [32, 1024].
  const double inv_batch = (1.0 / 32 - 1.0 / 1024) / std::log(32.0);
  double per_dp = 0;
  for (int dp : {1, 2, 4}) {
    const double speedup = dp * std::pow(kDpEfficiency, std::log2(static_cast<double>(dp)));
    per_dp += dp * (epochs * kEpochBase * (0.5 + 64.0 * inv_batch) / speedup + overhead) / 3.0;
  }
  return per_dp;
}

// ---- One method on one seed --------------------------------------------------------------------

struct Method {
  std::string name;
  std::string tuner;       // gp | random
  std::string pruner;      // none | median | asha | hyperband | forecast
  std::string mode;        // stop | promote
  bool cost_aware = true;  // the default where resources are declared, as here
  bool joint = false;      // the GP models (configuration, fidelity) jointly (FidelityModel)
  // Added to the study's tuner options: "-model", every proposal after the initial design the
  // model's; "-half", half drawn from the initial design on, without waiting for final values (a
  // pruner's default draws until 2 per dimension have completed, then half).
  std::string tuner_options = "";
  // budget.finalists: a name's suffix ":fK" ("gp+forecast:f3") trains the K best again at the end.
  int finalists = 0;
  // budget.rerun_top: a name's suffix ":rK" ("gp+forecast:r5") trains each configuration that
  // ranks among the K best again as it does; its choice at the end is the model's, as `hyperpack
  // best` names it.
  int rerun_top = 0;
  // objective.strategy last-N-avg: a name's suffix ":aN" ("gp+forecast:f3:a3"); 0, the last report.
  int mean_of_last = 0;
};

constexpr char kModelOnly[] = ", random_fraction: 0, initial_full_trials: 0";
constexpr char kHalfDrawn[] = ", initial_full_trials: 0";

const std::vector<Method>& AllMethods() {
  static const std::vector<Method> methods = {
      {"gp+asha", "gp", "asha", "promote"},
      {"gp+asha-nocost", "gp", "asha", "promote", false},
      {"gp+asha-joint", "gp", "asha", "promote", true, true},
      {"gp+hyperband-joint", "gp", "hyperband", "promote", true, true},
      {"gp+asha-stop", "gp", "asha", "stop"},
      {"gp+hyperband", "gp", "hyperband", "promote"},
      {"gp+median", "gp", "median", "stop"},
      {"gp+forecast", "gp", "forecast", "stop"},
      {"gp+forecast-nocost", "gp", "forecast", "stop", false},
      {"gp+forecast-joint", "gp", "forecast", "stop", true, true},
      {"gp+asha-model", "gp", "asha", "promote", true, false, kModelOnly},
      {"gp+hyperband-model", "gp", "hyperband", "promote", true, false, kModelOnly},
      {"gp+median-model", "gp", "median", "stop", true, false, kModelOnly},
      {"gp+forecast-model", "gp", "forecast", "stop", true, false, kModelOnly},
      {"gp+asha-half", "gp", "asha", "promote", true, false, kHalfDrawn},
      {"gp+hyperband-half", "gp", "hyperband", "promote", true, false, kHalfDrawn},
      {"gp+median-half", "gp", "median", "stop", true, false, kHalfDrawn},
      {"gp+forecast-half", "gp", "forecast", "stop", true, false, kHalfDrawn},
      {"random+forecast", "random", "forecast", "stop"},
      {"gp", "gp", "none", "stop"},
      {"gp-nocost", "gp", "none", "stop", false},
      {"random+asha", "random", "asha", "promote"},
      {"random", "random", "none", "stop"}};
  return methods;
}

struct Settings {
  int seeds = 20;
  int first_seed = 0;  // seeds first_seed .. first_seed + seeds - 1
  double max_epochs = 27;
  double min_epochs = 1;
  double eta = 3;
  double overhead_s = 30;
  double speedup = 0;  // see TrueLoss
  bool learn_ladder = true;
  bool precision = false;  // the space has precision {fp32, bf16}
  bool in_place = false;   // a trial promoted at its rung goes on without a restart (ContinueCmd)
  double horizon_s = 0;    // virtual seconds
  double target = 0;       // true loss at max_epochs
  int nodes = 1;
  int gpus_per_node = 8;
  const CurveTable* table = nullptr;  // --table: real curves instead of the synthetic ones
  // --table with finalists: each configuration's final errors with other seeds (ReadRepeats), the
  // first served to a configuration's second run, the next to its third.
  const std::vector<std::vector<double>>* reruns = nullptr;
  // --fresh-draws: every trial a table configuration serves after its first (a proposal nearest
  // an already served one, a finalist) ends at the next of its draws (the table's own, then
  // `reruns` in turn), as a new training would, at its last epoch only (its curve before is the
  // table's); else it sees the first trial's curve again.
  bool fresh_draws = false;
  // --draw-curves: with fresh_draws, the draws after the table's own are other seeds' whole
  // curves (ReadRepeatCurves), [draw][configuration][epoch]: a whole other training, so that a
  // pruner sees it too.
  const RepeatCurves* draw_curves = nullptr;
  // --rotate-draws: with fresh_draws, the draw a configuration's first trial is served turns
  // with the run's seed ((seed + configuration) mod the draws), the later ones in turn after it:
  // over seeds each of its trainings comes first, so that one lucky training in the table does not
  // decide every run's choice.
  bool rotate_draws = false;
  // --model-choice: each run is written twice to --json, the second as "NAME~model", its choice
  // at the end the configuration tuner::RecommendByModel recommends from its completions.
  bool model_choice = false;
};

struct RunResult {
  double time_to_target = kInf;   // virtual seconds
  double target_proposed = kInf;  // when the trial that reached the target was proposed
  double best_full = kInf;        // true loss at max_epochs, best completed trial
  int trials = 0;                 // configurations started
  int full_trials = 0;            // trained to max_epochs
  double gpu_busy_s = 0;          // GPU-seconds allocated to jobs, within the horizon
  double tuner_s = 0;             // real time in Propose and Observe
  // Each trial trained to max_epochs: when it ended (virtual seconds) and its final error, in the
  // order they ended (--json).
  std::vector<std::pair<double, double>> completions;
  // --table: the table configuration of each completion, in the same order (--json), so that a
  // run can be scored by other seeds' trainings of what it chose (lc_table.py repeats).
  std::vector<int> completed_configs;
  // --fresh-draws: the draw each completion was served (0 the table's own, then the other seeds').
  std::vector<int> completed_draws;
  // --table: the study's best after each completion (study::ChooseBest, as the controller and
  // `hyperpack best` choose it: with finalists, the configuration with the best mean of its
  // runs): when, and its table configuration (--json).
  std::vector<std::pair<double, int>> choices;
  // --model-choice: the configuration tuner::RecommendByModel recommends from every completion at
  // the end (-1 where it cannot: the study's own choice stands).
  int model_choice = -1;
  // Each time a trial reported a loss (at any epoch) below every earlier report: when (virtual
  // seconds) and the loss (--json). The real runs' measure: the first validation accuracy of 0.90.
  std::vector<std::pair<double, double>> reported;
  // --table: the distinct table configurations that served the trials started and those trained
  // to max_epochs. Proposals nearest to the same configuration see the same curve, so a repeat
  // tells a method nothing new.
  int configs = 0;
  int full_configs = 0;
  // Runs of a configuration trained again (finalists, and their third runs): how many were
  // launched, and how many of those were third runs (--json).
  int reruns = 0, third_runs = 0;
  // --table: the median distance in the unit cube from each trial started (and each trained to
  // max_epochs) to the best trial completed before it started; NaN when none had. How near its
  // incumbent a method searches, and which of its trials it lets finish.
  double near_started = std::numeric_limits<double>::quiet_NaN();
  double near_full = std::numeric_limits<double>::quiet_NaN();
  // --table: the share of the trials started with a coordinate in the unit cube within
  // kNearBound of its bound (AtBound): how often a method proposes at the edge of the space.
  double at_bound = std::numeric_limits<double>::quiet_NaN();
};

constexpr double kNearBound = 0.02;
constexpr char kMetric[] = "loss";  // the objective every trial reports

constexpr int kMaxTrials = 100000;  // never binds: the budget is the time limit

// The study's search space: the synthetic curves' own, or a table's.
std::string SearchSpaceText(const Settings& s) {
  if (s.table == nullptr) {
    std::string text =
        "search_space:\n"
        "  lr:            {type: float, low: 1.0e-4, high: 1.0, log: true}\n"
        "  batch_size:    {type: int, low: 32, high: 1024, log: true}\n"
        "  momentum:      {type: float, low: 0.5, high: 0.99}\n"
        "  weight_decay:  {type: float, low: 1.0e-6, high: 1.0e-2, log: true}\n"
        "  data_parallel: {type: categorical, values: [1, 2, 4]}\n";
    if (s.precision) text += "  precision:     {type: categorical, values: [fp32, bf16]}\n";
    return text;
  }
  // The table's own space; a trial is one process on one GPU.
  std::string text = "search_space:\n";
  for (const ParamSpec& p : s.table->space().params())
    text += StrCat("  ", p.name, ": {type: ", p.type == ParamType::kInt ? "int" : "float",
                   ", low: ", FormatDouble(p.low), ", high: ", FormatDouble(p.high),
                   ", log: ", p.log ? "true" : "false", "}\n");
  return text;
}

// The study the controller runs, as a user would write it.
std::string StudyText(const Settings& s, const Method& m) {
  std::string text =
      "name: asha-bench\n" +
      StrCat("objective: {metric: loss, direction: minimize",
             m.mean_of_last > 0 ? StrCat(", strategy: last-", m.mean_of_last, "-avg") : "", "}\n") +
      SearchSpaceText(s);
  text += StrCat("trial: {command: train --epochs ", FormatDouble(s.max_epochs), "}\n");
  text += StrCat("tuner: {algorithm: ", m.tuner, m.cost_aware ? "" : ", cost_aware: false",
                 m.tuner_options, "}\n");
  text += StrCat("budget: {max_trials: ", kMaxTrials, ", max_parallel: ", s.nodes * s.gpus_per_node,
                 ", time_limit: ", FormatDouble(s.horizon_s),
                 m.finalists > 0 ? StrCat(", finalists: ", m.finalists) : "",
                 m.rerun_top > 0 ? StrCat(", rerun_top: ", m.rerun_top) : "", "}\n");
  if (s.table == nullptr)
    text += StrCat("resources: {gpus: \"{data_parallel}\", cpus: \"", kCpusPerRank,
                   " * {data_parallel}\"}\n");
  else
    text += StrCat("resources: {gpus: 1, cpus: ", kCpusPerRank, "}\n");
  text += StrCat("pruner: {algorithm: ", m.pruner, ", min_resource: ", FormatDouble(s.min_epochs),
                 ", max_resource: ", FormatDouble(s.max_epochs),
                 ", reduction_factor: ", FormatDouble(s.eta), ", mode: ", m.mode, "}\n");
  return text;
}

// What the model and the measurements keep of one trial number, across its pauses.
struct TrialModel {
  Hp hp;
  size_t curve = 0;  // --table: the nearest configuration's curve
  uint64_t key = 0;
  double offset = 0;
  double proposed = kInf;  // virtual time
  Config config;           // as proposed
  double begun = kInf;     // virtual time its first job started
  int epochs = 0;          // trained and reported so far
  int gpus = 0;
  std::optional<double> started;  // while a job of it runs
  // A finalist (LaunchPlan::finalist_of). With --table its curve is the table's moved by `shift`,
  // so that it ends at another seed's draw (Settings::reruns).
  bool finalist = false;
  double shift = 0;
  // --fresh-draws: `shift` moves the last epoch's error only; the epochs before are the table's
  // (the repeats hold other seeds' final errors, not their curves), so no pruner sees the draw.
  bool last_only = false;
  // --draw-curves: another seed's whole curve of the configuration, served instead of the table's.
  const std::vector<double>* errors = nullptr;
  int draw = 0;  // --fresh-draws: which draw it was served (0 the table's own)

  // --table: the error served at epoch `e` (from 1), by the rules above.
  double ServedError(const CurveTable& table, int e) const {
    const Curve& c = table.curves()[curve];
    const bool last = static_cast<size_t>(e) == c.error.size();
    const std::vector<double>& served = errors != nullptr ? *errors : c.error;
    return served[static_cast<size_t>(e - 1)] + (last_only && !last ? 0.0 : shift);
  }
};

// One job of a trial: from its epochs so far to its stopping point, an epoch a step.
class Job : public hs::VirtualTrial {
 public:
  Job(const Settings& s, TrialModel& t, int stop_at, double epoch_s)
      : s_(s), t_(t), stop_at_(stop_at), epoch_s_(epoch_s) {}

  Step Next() override {
    // The driver asks for a step once the previous one has been played: that epoch is done, even
    // if the report it carried makes the controller stop the job.
    if (reported_) t_.epochs = *reported_;
    if (t_.epochs >= stop_at_) return {0.0, std::nullopt, hs::RankExit::Exited(0)};
    const int e = t_.epochs + 1;
    hs::MetricLine line;
    line.step = e;
    line.epoch = e;
    double loss = 0, epoch_s = epoch_s_;
    if (s_.table != nullptr) {  // the recorded value and time of that epoch
      loss = t_.ServedError(*s_.table, e);
      epoch_s = s_.table->curves()[t_.curve].seconds[static_cast<size_t>(e - 1)];
    } else {
      loss =
          TrueLoss(t_.hp, e, t_.offset, s_.speedup) + kNoiseSd * Normal(t_.key ^ Mix64(0x1000 + e));
    }
    line.values = {{kMetric, loss}};
    const double after = (reported_ ? 0.0 : s_.overhead_s) + epoch_s;
    reported_ = e;
    return {after, std::move(line), std::nullopt};
  }
  // Promoted at its rung: it trains on in the same run, with no start-up to pay again.
  bool Continue(double target) override {
    stop_at_ = static_cast<int>(std::lround(target));
    return true;
  }

 private:
  const Settings& s_;
  TrialModel& t_;
  int stop_at_;
  double epoch_s_;
  std::optional<int> reported_;
};

// The training runs the controller launches, and the GPU time they hold.
class Workload : public hs::VirtualWorkload {
 public:
  Workload(const Settings& s, uint64_t seed) : s_(s), seed_(seed) {}

  std::unique_ptr<hs::VirtualTrial> Start(const hs::LaunchPlan& plan, double now) override {
    TrialModel& t = trials_[plan.trial];
    if (!plan.resume) {
      t.hp = FromConfig(plan.config);
      t.config = plan.config;
      t.begun = now;
      if (s_.table != nullptr) t.curve = s_.table->Nearest(plan.config);
      // A configuration trained again: another seed's draw, a third run the next seed's. (The
      // controller trains a finalist's configuration at most twice again.)
      t.finalist = plan.finalist_of.has_value();
      if (s_.fresh_draws) {
        if (t.finalist) ++reruns_served_[t.curve];
        ServeFresh(visits_[t.curve]++, t);
      } else if (t.finalist && s_.reruns != nullptr) {
        const size_t draw = std::min(reruns_served_[t.curve]++, s_.reruns->size() - 1);
        t.shift = RerunShift(draw, t.curve);
      }
      t.key = Mix64(seed_ ^ Mix64(ConfigHash(plan.config)));
      t.offset = kOffsetSd * Normal(t.key);
      auto it = proposed_.find(plan.config);
      t.proposed = it == proposed_.end() ? now : it->second;
      ++new_trials_;
    }
    t.gpus = 0;
    for (const hs::RankPlacement& r : plan.placement.ranks)
      t.gpus += static_cast<int>(r.gpus.size());
    t.started = now;
    const double epoch_s =
        s_.table != nullptr ? 0.0 : EpochSeconds(t.hp, plan.placement.Nodes().size() > 1);
    return std::make_unique<Job>(s_, t, StopAt(plan), epoch_s);
  }

  void Ended(int trial, double now) override {
    TrialModel& t = trials_.at(trial);
    if (t.started) gpu_busy_s_ += t.gpus * (now - *t.started);
    t.started.reset();
  }

  void Proposed(const Config& config, double now) override { proposed_[config] = now; }

  const TrialModel* Find(int trial) const {
    auto it = trials_.find(trial);
    return it == trials_.end() ? nullptr : &it->second;
  }
  int new_trials() const { return new_trials_; }
  // Finalists' runs launched, and of them a configuration's third (Settings::reruns serves them).
  std::pair<int, int> Reruns() const {
    std::pair<int, int> n{0, 0};
    for (const auto& [curve, served] : reruns_served_) {
      n.first += static_cast<int>(served);
      n.second += served > 1 ? static_cast<int>(served) - 1 : 0;
    }
    return n;
  }
  const std::map<int, TrialModel>& trials() const { return trials_; }
  // --fresh-draws: serves trial `t` its configuration's `visit`-th draw (0 the table's own; then
  // two other seeds'; then around again): with --draw-curves another seed's whole curve, else the
  // table's curve with its last epoch moved to a repeat's final error.
  void ServeFresh(size_t visit, TrialModel& t) const {
    const size_t draws = s_.reruns->size() + 1;
    const size_t first = s_.rotate_draws ? (seed_ + t.curve) % draws : 0;
    const size_t draw = (visit + first) % draws;
    t.draw = static_cast<int>(draw);
    if (draw > 0 && s_.draw_curves != nullptr) {
      t.errors = &(*s_.draw_curves)[draw - 1][t.curve];
      return;
    }
    t.shift = draw == 0 ? 0.0 : RerunShift(draw - 1, t.curve);
    t.last_only = true;
  }
  // What moves configuration `curve`'s recorded curve to end at the repeats' `draw`-th other seed.
  double RerunShift(size_t draw, size_t curve) const {
    return (*s_.reruns)[draw][curve] - s_.table->curves()[curve].error.back();
  }
  // --table: how many distinct configurations served the trials started.
  int DistinctCurves() const {
    std::set<size_t> curves;
    for (const auto& [n, t] : trials_) curves.insert(t.curve);
    return static_cast<int>(curves.size());
  }
  // Jobs still running at `horizon` held their GPUs up to it.
  double GpuSeconds(double horizon) const {
    double busy = gpu_busy_s_;
    for (const auto& [n, t] : trials_)
      if (t.started) busy += t.gpus * (horizon - *t.started);
    return busy;
  }

 private:
  // hyperpack-trainer's rule: HYPERPACK_STOP_AT epochs when the controller sets it (promote
  // mode, below the last rung), else the full length.
  int StopAt(const hs::LaunchPlan& plan) const {
    if (!plan.ranks.empty())
      for (const auto& [name, value] : plan.ranks[0].env)
        if (name == env::kStopAt)
          if (std::optional<double> v = ParseDouble(value))
            return static_cast<int>(std::lround(*v));
    return static_cast<int>(s_.max_epochs);
  }

  const Settings& s_;
  uint64_t seed_;
  std::map<size_t, size_t> reruns_served_;  // by table configuration: other seeds' draws served
  std::map<size_t, size_t> visits_;         // --fresh-draws: trials begun, by table configuration
  std::map<int, TrialModel> trials_;        // by trial number
  std::map<Config, double> proposed_;       // the latest proposal of each configuration
  int new_trials_ = 0;
  double gpu_busy_s_ = 0;
};

// The tuner as the driver sees it, keeping its first error: the controller only stops launching
// on one, and a run cut off at the horizon would not say so.
class CheckedTuner : public ht::Tuner {
 public:
  explicit CheckedTuner(std::unique_ptr<ht::Tuner> tuner) : tuner_(std::move(tuner)) {}
  Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) override {
    Result<std::vector<Config>> r = tuner_->Propose(n, pending);
    if (!r.ok() && status_.ok()) status_ = r.status().WithContext("Propose");
    return r;
  }
  void Observe(const ht::TrialOutcome& outcome) override { tuner_->Observe(outcome); }
  std::string name() const override { return tuner_->name(); }
  const Status& status() const { return status_; }

 private:
  std::unique_ptr<ht::Tuner> tuner_;
  Status status_;
};

// A trial trained to max_epochs: its number, when it ended and its final error.
struct Finished {
  int number;
  double ended, error;
};

double Quantile(std::vector<double> v, double q);  // below: the q-th, interpolated; kInf if empty

class Simulation {
 public:
  Simulation(const Settings& s, const Method& m, int seed)
      : s_(s), m_(m), seed_(static_cast<uint64_t>(seed)) {}

  Result<RunResult> Run() {
    const study::ParseOutcome parsed = study::ParseStudy(StudyText(s_, m_), "asha_bench");
    if (!parsed.spec) return Status::Internal("the benchmark's study: ", parsed.ErrorText());
    const study::StudySpec& spec = *parsed.spec;
    ht::TunerOptions tuner_options = hs::TunerOptionsFor(spec, seed_);
    if (m_.joint) {
      tuner_options.fidelity_model = ht::TunerOptions::FidelityModel::kJoint;
      tuner_options.min_resource = s_.min_epochs;
      tuner_options.max_resource = s_.max_epochs;
    }
    HP_ASSIGN_OR_RETURN(std::unique_ptr<ht::Tuner> made, ht::MakeTuner(spec.space, tuner_options));
    CheckedTuner tuner(std::move(made));
    hs::ControllerOptions options;
    options.max_trials = kMaxTrials;
    options.max_parallel = s_.nodes * s_.gpus_per_node;
    options.log_root = "/virtual";
    options.learn_ladder = s_.learn_ladder;
    options.continue_in_place = s_.in_place;
    options.nodes = Nodes(s_);
    HP_ASSIGN_OR_RETURN(std::unique_ptr<hs::StudyController> controller,
                        hs::StudyController::Make(spec, std::move(options)));
    Workload workload(s_, seed_);
    hs::VirtualOptions virtual_options;
    virtual_options.horizon = s_.horizon_s;
    hs::VirtualDriver driver(*controller, tuner, workload, virtual_options);
    HP_RETURN_IF_ERROR(driver.Run(hs::StoredStudy{}));
    HP_RETURN_IF_ERROR(tuner.status());
    // Only the time limit may end a run before the horizon (or, with finalists, their end).
    if (driver.summary() && driver.summary()->reason != hs::StopReason::kTimeLimit &&
        !(m_.finalists > 0 && driver.summary()->reason == hs::StopReason::kBudgetReached))
      return Status::Internal("the study stopped at ", driver.now(),
                              " s: ", driver.summary()->stop_reason);

    HP_ASSIGN_OR_RETURN(RunResult r, Completed(driver, workload));
    r.gpu_busy_s = workload.GpuSeconds(s_.horizon_s);
    r.tuner_s = driver.tuner_seconds();
    return r;
  }

 private:
  // What the run trained to the end, and its trials' counts.
  Result<RunResult> Completed(const hs::VirtualDriver& driver, const Workload& workload) const {
    RunResult r;
    std::set<size_t> full_curves;
    std::vector<Finished> finished;
    std::vector<study::CompletedRun> runs;
    // The trials the controller recorded completed, in the order they ended: each exited 0 after
    // reporting its last epoch.
    for (const hs::Row& row : driver.rows()) {
      const auto* finish = std::get_if<hs::FinishTrialRow>(&row);
      if (finish == nullptr || finish->trial.state != storage::TrialState::kCompleted) continue;
      const int number = finish->trial.number;
      const TrialModel* t = workload.Find(number);
      if (t == nullptr || t->epochs != static_cast<int>(s_.max_epochs))
        return Status::Internal("trial ", number, " completed after ", t ? t->epochs : 0,
                                " epochs, not ", s_.max_epochs);
      ++r.full_trials;
      const double truth = s_.table != nullptr
                               ? t->ServedError(*s_.table, static_cast<int>(s_.max_epochs))
                               : TrueLoss(t->hp, s_.max_epochs, t->offset, s_.speedup);
      r.best_full = std::min(r.best_full, truth);
      full_curves.insert(t->curve);
      finished.push_back({number, finish->trial.ended.value_or(kInf), truth});
      r.completions.emplace_back(finish->trial.ended.value_or(kInf), truth);
      if (s_.table != nullptr) {
        r.completed_configs.push_back(static_cast<int>(t->curve));
        r.completed_draws.push_back(t->draw);
        Choose(workload, finish->trial, &runs, &r);
      }
      if (truth <= s_.target && !std::isfinite(r.time_to_target)) {
        r.time_to_target = finish->trial.ended.value_or(kInf);  // wall_start 0: virtual time
        r.target_proposed = t->proposed;
      }
    }
    r.trials = workload.new_trials();
    r.reported = Reported(driver);
    if (s_.table != nullptr && (s_.model_choice || m_.rerun_top > 0))
      r.model_choice = ModelChoice(workload, runs);
    // budget.rerun_top: the study's best at its end is the model's (report's BestOf), unless the
    // re-runs repeated their first runs exactly, where it stays the best single run.
    if (m_.rerun_top > 0 && r.model_choice >= 0 && !r.choices.empty() &&
        !ReRunsRepeat(workload, runs))
      r.choices.back().second = r.model_choice;
    if (s_.table != nullptr) {
      r.configs = workload.DistinctCurves();
      std::tie(r.reruns, r.third_runs) = workload.Reruns();
      r.full_configs = static_cast<int>(full_curves.size());
      NearIncumbent(workload, finished, &r);
      r.at_bound = AtBound(workload);
    }
    return r;
  }

  // The study's best once `trial` has completed, as the controller chooses it (RunResult::choices).
  void Choose(const Workload& workload, const storage::TrialRecord& trial,
              std::vector<study::CompletedRun>* runs, RunResult* r) const {
    const TrialModel* t = workload.Find(trial.number);
    if (t == nullptr || !trial.value) return;
    // With rerun_top the controller's best is the best single run until the end (report.h).
    runs->push_back({trial.number, t->config, *trial.value, t->finalist && m_.rerun_top == 0});
    const std::optional<study::BestChoice> best = study::ChooseBest(*runs, study::Objective{});
    if (const TrialModel* b = best ? workload.Find(best->trial) : nullptr)
      r->choices.emplace_back(trial.ended.value_or(kInf), static_cast<int>(b->curve));
  }

  // Whether the re-runs among `runs` returned their first runs' values exactly (study::Repeats).
  static bool ReRunsRepeat(const Workload& workload, std::vector<study::CompletedRun> runs) {
    for (study::CompletedRun& run : runs) {
      const TrialModel* t = workload.Find(run.number);
      run.finalist = t != nullptr && t->finalist;
    }
    return study::FindRepeats(runs).Exact();
  }

  // RunResult::model_choice.
  int ModelChoice(const Workload& workload, const std::vector<study::CompletedRun>& runs) const {
    std::vector<Config> configs;
    std::vector<double> values;
    for (const study::CompletedRun& run : runs) {
      configs.push_back(run.config);
      values.push_back(run.value);
    }
    Result<tuner::Recommendation> rec = tuner::RecommendByModel(s_.table->space(), configs, values);
    if (!rec.ok()) return -1;
    const TrialModel* t = workload.Find(runs[rec->index].number);
    return t ? static_cast<int>(t->curve) : -1;
  }

  // RunResult::at_bound: over the numeric parameters with more than two values (a switch is
  // always at a bound).
  double AtBound(const Workload& workload) const {
    const std::vector<ParamSpec>& params = s_.table->space().params();
    int at = 0, all = 0;
    for (const auto& [number, t] : workload.trials()) {
      const std::vector<double> x = s_.table->Coordinates(t.config);
      bool near = false;
      for (size_t k = 0; k < x.size(); ++k) {
        const bool graded =
            params[k].type == ParamType::kFloat ||
            (params[k].type == ParamType::kInt && params[k].high - params[k].low > 1);
        near = near || (graded && (x[k] < kNearBound || x[k] > 1 - kNearBound));
      }
      at += near;
      ++all;
    }
    return all ? static_cast<double>(at) / all : std::numeric_limits<double>::quiet_NaN();
  }

  // RunResult::reported, from the metrics the controller wrote.
  static std::vector<std::pair<double, double>> Reported(const hs::VirtualDriver& driver) {
    std::vector<std::pair<double, double>> points, out;
    for (const hs::Row& row : driver.rows())
      if (const auto* m = std::get_if<hs::MetricsRow>(&row))
        for (const storage::MetricPoint& p : m->points)
          if (p.name == kMetric) points.emplace_back(p.time, p.value);
    std::stable_sort(points.begin(), points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& p : points)
      if (out.empty() || p.second < out.back().second) out.push_back(p);
    return out;
  }

  // RunResult::near_started and near_full, from the trials that completed.
  void NearIncumbent(const Workload& workload, const std::vector<Finished>& finished,
                     RunResult* r) const {
    std::set<int> full;
    for (const Finished& f : finished) full.insert(f.number);
    std::vector<double> started, trained;
    for (const auto& [number, t] : workload.trials()) {
      const Finished* incumbent = nullptr;
      for (const Finished& f : finished)
        if (f.ended <= t.begun && (incumbent == nullptr || f.error < incumbent->error))
          incumbent = &f;
      if (incumbent == nullptr) continue;
      const double distance =
          s_.table->Distance(t.config, workload.Find(incumbent->number)->config);
      started.push_back(distance);
      if (full.count(number)) trained.push_back(distance);
    }
    if (!started.empty()) r->near_started = Quantile(std::move(started), 0.5);
    if (!trained.empty()) r->near_full = Quantile(std::move(trained), 0.5);
  }

  // Nodes as the controller names them: GPUs "0".."N-1", 4 CPU slots per GPU.
  static std::vector<hs::ClusterNode> Nodes(const Settings& s) {
    std::vector<hs::ClusterNode> nodes;
    for (int i = 0; i < s.nodes; ++i) {
      hs::ClusterNode n;
      n.node = {"node" + std::to_string(i), s.gpus_per_node, kCpusPerRank * s.gpus_per_node};
      for (int g = 0; g < s.gpus_per_node; ++g) n.gpu_names.push_back(std::to_string(g));
      n.address = n.node.name;
      nodes.push_back(std::move(n));
    }
    return nodes;
  }

  const Settings& s_;
  const Method& m_;
  uint64_t seed_;
};

// ---- Summaries -------------------------------------------------------------------------------

// The q-quantile, interpolating between order statistics; infinite when it depends on an
// infinite value.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return kInf;
  std::sort(v.begin(), v.end());
  const double h = (static_cast<double>(v.size()) - 1.0) * q;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = h - static_cast<double>(lo);
  if (!std::isfinite(v[lo]) || (frac > 0 && !std::isfinite(v[hi]))) return kInf;
  return frac > 0 ? v[lo] + frac * (v[hi] - v[lo]) : v[lo];
}

// Virtual seconds in `unit` seconds (3600: hours; a table's runs are seconds long).
std::string Time(double s, double unit) {
  return std::isfinite(s) ? FormatShort(s / unit, 3) : "never";
}
std::string Loss(double x) { return std::isfinite(x) ? FormatShort(x, 4) : "none"; }

// A number for JSON, which has no NaN: null.
std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream out;
  out.precision(6);
  out << v;
  return out.str();
}

// [[a, b], ...] for JSON.
void WritePairs(const std::vector<std::pair<double, double>>& pairs, std::ostream& out) {
  out << "[";
  for (size_t k = 0; k < pairs.size(); ++k)
    out << (k ? ", [" : "[") << pairs[k].first << ", " << pairs[k].second << "]";
  out << "]";
}

// One run of WriteRuns, its choices given (the study's own, or the model's at the end).
void WriteRun(const Settings& s, const std::string& name, int seed, int finalists,
              const RunResult& r, const std::vector<std::pair<double, int>>& choices,
              std::ostream& out) {
  out << "{\"method\": \"" << name << "\", \"seed\": " << seed << ", \"finalists\": " << finalists
      << ", \"trials\": " << r.trials << ", \"configs\": " << r.configs
      << ", \"full_configs\": " << r.full_configs << ", \"reruns\": " << r.reruns
      << ", \"third_runs\": " << r.third_runs
      << ", \"near_started\": " << JsonNumber(r.near_started)
      << ", \"near_full\": " << JsonNumber(r.near_full)
      << ", \"at_bound\": " << JsonNumber(r.at_bound) << ", \"completions\": ";
  WritePairs(r.completions, out);
  out << ", \"reported\": ";
  WritePairs(r.reported, out);
  if (s.table != nullptr) {
    out << ", \"completed_configs\": [";
    for (size_t k = 0; k < r.completed_configs.size(); ++k)
      out << (k ? ", " : "") << r.completed_configs[k];
    out << "], \"choices\": [";
    for (size_t k = 0; k < choices.size(); ++k)
      out << (k ? ", " : "") << "[" << JsonNumber(choices[k].first) << ", " << choices[k].second
          << "]";
    out << "]";
    if (s.fresh_draws) {
      out << ", \"completed_draws\": [";
      for (size_t k = 0; k < r.completed_draws.size(); ++k)
        out << (k ? ", " : "") << r.completed_draws[k];
      out << "]";
    }
  }
  out << "}";
}

// --json: every run's completions and improving reports, for bench/lc_optuna.py's side-by-side
// table of regret at several budgets (Optuna's samplers and pruners replay the same table there).
// Method names are this file's own, so they need no escaping.
bool WriteRuns(const std::string& path, const Settings& s,
               const std::vector<const Method*>& methods, const std::vector<RunResult>& results,
               double optimum, int gpus) {
  std::ofstream out(path);
  out.precision(10);
  out << "{\"tool\": \"hyperpack\", \"family\": \""
      << (s.table != nullptr ? s.table->family() : "synthetic")
      << "\", \"epochs\": " << s.max_epochs << ", \"gpus\": " << gpus
      << ", \"horizon_s\": " << s.horizon_s << ", \"start_cost_s\": " << s.overhead_s
      << ", \"in_place\": " << (s.in_place ? "true" : "false")
      << ", \"repeats_served\": " << (s.reruns != nullptr ? s.reruns->size() : 0)
      << ", \"fresh_draws\": " << (s.fresh_draws ? "true" : "false")
      << ", \"draw_curves\": " << (s.draw_curves != nullptr ? "true" : "false")
      << ", \"rotate_draws\": " << (s.rotate_draws ? "true" : "false")
      << ", \"best_final_error\": " << optimum << ", \"runs\": [";
  bool first = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const Method& m = *methods[i / static_cast<size_t>(s.seeds)];
    const int seed = s.first_seed + static_cast<int>(i % static_cast<size_t>(s.seeds));
    out << (first ? "\n  " : ",\n  ");
    first = false;
    WriteRun(s, m.name, seed, m.finalists, results[i], results[i].choices, out);
    if (!s.model_choice) continue;
    // The same run, judged by what the model recommends at its end.
    std::vector<std::pair<double, int>> choices = results[i].choices;
    if (!choices.empty() && results[i].model_choice >= 0)
      choices.back().second = results[i].model_choice;
    out << ",\n  ";
    WriteRun(s, m.name + "~model", seed, m.finalists, results[i], choices, out);
  }
  out << "\n]}\n";
  return static_cast<bool>(out.flush());
}

// The command line, checked. `table` is where Settings::table points once Main has read it.
struct Args {
  Settings s;
  std::optional<CurveTable> table;
  std::vector<std::vector<double>> reruns;  // --repeats (ReadReruns)
  RepeatCurves draw_curves;                 // --draw-curves (ReadReruns)
  std::optional<double> start_cost;
  std::vector<const Method*> methods;
  double budget_trials = 0, gap = 0;
  int threads = 1;
  std::string json_path;
  bool want_curves = false;  // --draw-curves
};

// The options that decide what a --table run serves and writes: repeats, draws, the model's choice.
void AddDrawOptions(cxxopts::Options& options) {
  options.add_options()(
      "repeats",
      "with --table and :fK methods or --fresh-draws: lc_table.py's repeats of the table, whose "
      "first two other seeds a configuration's second and third runs are served (default: the "
      "table's name with .repeats.json)",
      cxxopts::value<std::string>())(
      "fresh-draws",
      "with --table: each further trial a configuration serves (a proposal nearest one already "
      "served, a finalist) ends at its next draw, the table's own and the repeats' first two "
      "other seeds in turn, as a new training would; its epochs before the last are the table's "
      "(default: it sees the first trial's curve again; finalists alone are served the repeats, "
      "their whole curve moved)")(
      "draw-curves",
      "with --fresh-draws: the draws after the table's own are other seeds' whole curves, the "
      "first two of this file's (lc_table.py repeats --curves; default, or with no =FILE: the "
      "table's name with .curves.json), not the table's curve ending at the repeats' finals: a "
      "further trial is a whole other training",
      cxxopts::value<std::string>()->implicit_value(""))(
      "rotate-draws",
      "with --fresh-draws: a configuration's first trial is served draw (seed + configuration) "
      "mod 3, not always the table's own, the later ones the draws after it in turn: over seeds "
      "no one training of the table decides every run")(
      "model-choice",
      "with --table and --json: each run is also written as NAME~model, chosen at its end by the "
      "best posterior mean of a GP fitted to its completions (tuner::RecommendByModel) among its "
      "5 best configurations");
}

cxxopts::Options Options(const std::vector<std::string>& names) {
  cxxopts::Options options(
      "asha_bench",
      "Early stopping against full training on synthetic learning curves, "
      "through the study controller, the tuner and the pruners, in virtual time");
  options.add_options()("seeds", "seeds 0 .. N-1", cxxopts::value<int>()->default_value("20"))(
      "first-seed", "the first seed: seeds F .. F+N-1, so that more seeds add to earlier runs",
      cxxopts::value<int>()->default_value("0"))(
      "methods", "comma-separated: " + Join(names, ","),
      cxxopts::value<std::vector<std::string>>()->default_value(Join(names, ",")))(
      "budget-trials",
      "the budget: GPU-seconds for this many full-length trials of the space's average "
      "configuration, on 8 GPUs",
      cxxopts::value<double>()->default_value("40"))(
      "target-gap", "target: the global optimum of the 27-epoch loss plus this",
      cxxopts::value<double>()->default_value("0.02"))(
      "cluster", "1x8 (one node of 8 GPUs) or 2x4",
      cxxopts::value<std::string>()->default_value("1x8"))(
      "speedup",
      "a learning rate q decades above the optimum converges 10^(speedup q) times faster",
      cxxopts::value<double>()->default_value("0"))(
      "learn-ladder",
      "asha, hyperband: the tuner learns every trial's values at 1, 3 and 9 epochs, as the runner "
      "does (false: only at the rungs of its own bracket)",
      cxxopts::value<bool>()->default_value("true"))(
      "precision", "the space gains precision {fp32, bf16}; bf16 halves the epoch time")(
      "table",
      "real curves instead of the synthetic ones: a table of bench/lc_table.py (its space, its "
      "epochs, each proposal served by the nearest configuration's recorded errors and seconds)",
      cxxopts::value<std::string>())(
      "start-cost",
      "seconds every job start costs (default: 30; with --table, a tenth of a full run's mean)",
      cxxopts::value<double>())(
      "in-place",
      "promote mode: a trial promoted at the rung it has just reached goes on without a restart "
      "(the local runner's way; agents and Slurm restart it)")(
      "threads", "runs in parallel (each run is deterministic either way)",
      cxxopts::value<int>()->default_value("1"))(
      "json",
      "also write every run's completed trials (time, final error) and improving reports to this "
      "file",
      cxxopts::value<std::string>())("h,help", "this help");
  AddDrawOptions(options);
  return options;
}

// A method's suffix after its name: ":fK" (K finalists) or ":aN" (objective strategy
// last-N-avg); an error says which.
Status ApplySuffix(const std::string& name, const std::string& suffix, Method* m) {
  std::optional<double> k = ParseDouble(suffix.substr(std::min<size_t>(1, suffix.size())));
  const bool whole = k && *k == std::floor(*k);
  if (suffix.starts_with("f") && whole && *k >= 1 && *k <= 100) {
    m->finalists = static_cast<int>(*k);
  } else if (suffix.starts_with("a") && whole && *k >= 2 && *k <= 100) {
    m->mean_of_last = static_cast<int>(*k);
  } else if (suffix.starts_with("r") && whole && *k >= 1 && *k <= 100) {
    m->rerun_top = static_cast<int>(*k);
  } else {
    return Status::Invalid("--methods: '", name, "': ':", suffix,
                           "' is not :fK (K finalists, 1-100), :aN (the mean of the last N "
                           "reports, 2-100) or :rK (re-run the K best as they rank, 1-100)");
  }
  return Status::Ok();
}

// The methods named, in order; an error names the unknown one. "NAME:fK" is NAME with K
// finalists (budget.finalists), "NAME:rK" with budget.rerun_top K, "NAME:aN" with objective
// strategy last-N-avg; several may follow.
Result<std::vector<const Method*>> FindMethods(const std::vector<std::string>& wanted,
                                               const std::vector<std::string>& names) {
  static std::deque<Method> variants;  // stable addresses for the methods with suffixes made here
  std::vector<const Method*> out;
  for (const std::string& n : wanted) {
    std::vector<std::string> parts;
    for (size_t from = 0, colon = 0; colon != std::string::npos; from = colon + 1) {
      colon = n.find(':', from);
      parts.push_back(n.substr(from, colon == std::string::npos ? colon : colon - from));
    }
    auto it = std::find_if(AllMethods().begin(), AllMethods().end(),
                           [&](const Method& m) { return m.name == parts.front(); });
    if (it == AllMethods().end())
      return Status::Invalid("--methods: unknown method '", parts.front(), "'; expected one of ",
                             Join(names, ", "),
                             ", each with :fK for K finalists, :rK to re-run the K best as they "
                             "rank and :aN for the mean of the last N reports if wanted");
    if (parts.size() == 1) {
      out.push_back(&*it);
      continue;
    }
    variants.push_back(*it);
    variants.back().name = n;
    for (size_t i = 1; i < parts.size(); ++i)
      if (Status s = ApplySuffix(n, parts[i], &variants.back()); !s.ok()) return s;
    out.push_back(&variants.back());
  }
  return out;
}

// The parsed numbers' ranges: 0 when they hold, else 2 (the error printed).
int CheckArgs(const Args& a) {
  if (a.start_cost && !(*a.start_cost >= 0 && std::isfinite(*a.start_cost))) {
    std::cerr << "asha_bench: --start-cost must be a finite number of seconds >= 0\n";
    return 2;
  }
  if (a.s.seeds < 1 || a.threads < 1 || !(a.budget_trials > 0) || !(a.gap > 0) ||
      a.methods.empty() || a.s.first_seed < 0) {
    std::cerr << "asha_bench: --seeds, --threads, --budget-trials, --target-gap must be > 0, "
                 "--first-seed >= 0 and --methods not empty\n";
    return 2;
  }
  if (a.s.fresh_draws && !a.table) {
    std::cerr << "asha_bench: --fresh-draws serves a table's repeats: pass --table too\n";
    return 2;
  }
  if ((a.want_curves || a.s.rotate_draws) && !a.s.fresh_draws) {
    std::cerr << "asha_bench: --" << (a.want_curves ? "draw-curves" : "rotate-draws")
              << " is a way of serving fresh draws: pass --fresh-draws too\n";
    return 2;
  }
  return 0;
}

// A finalist's configuration runs at most twice more: a finalist and a third run.
constexpr int kRerunDraws = 2;

// The file option `name` names, or where none is named the table's path with `suffix` for .json.
std::string BesideTable(const cxxopts::ParseResult& args, const std::string& name,
                        const std::string& suffix) {
  std::string path = args.count(name) ? args[name].as<std::string>() : "";
  if (path.empty()) {
    path = args["table"].as<std::string>();
    if (path.size() > 5 && path.substr(path.size() - 5) == ".json") path.resize(path.size() - 5);
    path += suffix;
  }
  return path;
}

// --repeats, read where a :fK method replays a table or --fresh-draws asks for them (the table's
// own repeats file unless named); and --draw-curves' file with --fresh-draws.
int ReadReruns(const cxxopts::ParseResult& args, Args* a) {
  const bool finalists = std::any_of(a->methods.begin(), a->methods.end(), [](const Method* m) {
    return m->finalists > 0 || m->rerun_top > 0;
  });
  if (!a->table || (!finalists && !a->s.fresh_draws)) return 0;
  const std::string path = BesideTable(args, "repeats", ".repeats.json");
  Result<std::vector<std::vector<double>>> read = ReadRepeats(path, *a->table, kRerunDraws);
  if (!read.ok()) {
    std::cerr << "asha_bench: --repeats: " << read.status().message() << "\n";
    return 2;
  }
  a->reruns = std::move(*read);
  if (!a->want_curves || !a->s.fresh_draws) return 0;
  Result<RepeatCurves> curves =
      ReadRepeatCurves(BesideTable(args, "draw-curves", ".curves.json"), *a->table, kRerunDraws);
  if (!curves.ok()) {
    std::cerr << "asha_bench: --draw-curves: " << curves.status().message() << "\n";
    return 2;
  }
  a->draw_curves = std::move(*curves);
  return 0;
}

// Reads the command line into *a: 0 to go on, else the exit status (help printed: -1 for 0).
int ParseArgs(int argc, char** argv, Args* a) {
  std::vector<std::string> names;
  for (const Method& m : AllMethods()) names.push_back(m.name);
  cxxopts::Options options = Options(names);
  Settings& s = a->s;
  try {
    cxxopts::ParseResult args = options.parse(argc, argv);
    if (args.count("help")) {
      std::cout << options.help();
      return -1;
    }
    s.seeds = args["seeds"].as<int>();
    s.first_seed = args["first-seed"].as<int>();
    a->budget_trials = args["budget-trials"].as<double>();
    a->gap = args["target-gap"].as<double>();
    a->threads = args["threads"].as<int>();
    s.speedup = args["speedup"].as<double>();
    s.learn_ladder = args["learn-ladder"].as<bool>();
    s.precision = args["precision"].as<bool>();
    s.in_place = args["in-place"].as<bool>();
    s.fresh_draws = args["fresh-draws"].as<bool>();
    s.rotate_draws = args["rotate-draws"].as<bool>();
    s.model_choice = args["model-choice"].as<bool>();
    a->want_curves = args.count("draw-curves") > 0;
    if (args.count("json")) a->json_path = args["json"].as<std::string>();
    if (args.count("start-cost")) a->start_cost = args["start-cost"].as<double>();
    if (args.count("table")) {
      Result<CurveTable> read = CurveTable::Read(args["table"].as<std::string>());
      if (!read.ok()) {
        std::cerr << "asha_bench: --table: " << read.status().message() << "\n";
        return 2;
      }
      a->table = std::move(*read);
      if (s.precision || s.speedup != 0) {
        std::cerr << "asha_bench: --precision and --speedup shape the synthetic curves; a "
                     "table's are recorded\n";
        return 2;
      }
    }
    const std::string cluster = args["cluster"].as<std::string>();
    if (cluster != "1x8" && cluster != "2x4") {
      std::cerr << "asha_bench: --cluster is 1x8 or 2x4\n";
      return 2;
    }
    s.nodes = cluster == "1x8" ? 1 : 2;
    s.gpus_per_node = cluster == "1x8" ? 8 : 4;
    Result<std::vector<const Method*>> methods =
        FindMethods(args["methods"].as<std::vector<std::string>>(), names);
    if (!methods.ok()) {
      std::cerr << "asha_bench: " << methods.status().message() << "\n";
      return 2;
    }
    a->methods = std::move(*methods);
    if (int status = ReadReruns(args, a); status != 0) return status;
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "asha_bench: " << e.what() << "\n";
    return 2;
  }
  return CheckArgs(*a);
}

// Every (method, seed), spread over the threads; each run is independent. Results in method-major
// order; false when a run failed (its error printed).
bool RunAll(const Settings& s, const std::vector<const Method*>& methods, int threads,
            std::vector<RunResult>* results) {
  const double unit = s.table ? 1.0 : 3600.0;
  const char* unit_name = s.table ? "s" : "h";
  const size_t n_runs = methods.size() * static_cast<size_t>(s.seeds);
  results->assign(n_runs, RunResult{});
  std::vector<std::string> errors(n_runs);
  std::atomic<size_t> next{0};
  std::mutex mu;
  auto worker = [&] {
    for (size_t i = next++; i < n_runs; i = next++) {
      const Method& m = *methods[i / static_cast<size_t>(s.seeds)];
      const int seed = s.first_seed + static_cast<int>(i % static_cast<size_t>(s.seeds));
      const Clock::time_point t0 = Clock::now();
      Result<RunResult> r = Simulation(s, m, seed).Run();
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        errors[i] = r.status().message();
        std::fprintf(stderr, "asha_bench: %s seed %d: %s\n", m.name.c_str(), seed,
                     errors[i].c_str());
        continue;
      }
      (*results)[i] = *r;
      std::fprintf(stderr,
                   "asha_bench: %-12s seed %2d: target at %s %s, best %s, %d trials (%d full), "
                   "%.2fs\n",
                   m.name.c_str(), seed, Time(r->time_to_target, unit).c_str(), unit_name,
                   Loss(r->best_full).c_str(), r->trials, r->full_trials,
                   std::chrono::duration<double>(Clock::now() - t0).count());
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  return std::all_of(errors.begin(), errors.end(), [](const std::string& e) { return e.empty(); });
}

// Per method: the summaries over seeds.
struct Summary {
  std::vector<double> ttt, proposed, best, trials, full, busy, tuner;
  int reached = 0;
};

std::vector<Summary> Summarise(const Settings& s, size_t methods,
                               const std::vector<RunResult>& results) {
  const int gpus = s.nodes * s.gpus_per_node;
  std::vector<Summary> sums(methods);
  for (size_t i = 0; i < results.size(); ++i) {
    Summary& su = sums[i / static_cast<size_t>(s.seeds)];
    const RunResult& r = results[i];
    su.ttt.push_back(r.time_to_target);
    su.proposed.push_back(r.target_proposed);
    su.best.push_back(r.best_full);
    su.trials.push_back(r.trials);
    su.full.push_back(r.full_trials);
    su.busy.push_back(r.gpu_busy_s / (gpus * s.horizon_s));
    su.tuner.push_back(r.tuner_s);
    su.reached += std::isfinite(r.time_to_target);
  }
  return sums;
}

void PrintGoals(const Settings& s, const std::vector<const Method*>& methods,
                const std::vector<Summary>& sums);

// The table, one row per method, and the goals against gp+asha where it ran.
void Print(const Settings& s, const std::vector<const Method*>& methods,
           const std::vector<Summary>& sums, double budget_trials, double trial_gpu_s,
           double optimum, double gap) {
  const int gpus = s.nodes * s.gpus_per_node;
  const double unit = s.table ? 1.0 : 3600.0;
  const char* unit_name = s.table ? "s" : "h";
  size_t ref = 0;
  for (size_t k = 0; k < methods.size(); ++k)
    if (methods[k]->name == "gp+asha") ref = k;
  const double ref_ttt = Quantile(sums[ref].ttt, 0.5);

  std::printf(
      "%d seeds, %d GPUs (%dx%d), budget %.3g %s of virtual time (%.3g GPU-%s: %g average "
      "full-length trials of %.3g GPU-s), rungs %g..%g epochs, eta %g.\n"
      "Target: a trial trained to %g epochs with true loss <= %.4f (global optimum %.4f + %g). "
      "Median [quartiles] over seeds; 'never': the median seed did not reach it; 'proposed at': "
      "when "
      "the trial that first reached the target was proposed.\n\n",
      s.seeds, gpus, s.nodes, s.gpus_per_node, s.horizon_s / unit, unit_name,
      gpus * s.horizon_s / unit, unit_name, budget_trials, trial_gpu_s, s.min_epochs, s.max_epochs,
      s.eta, s.max_epochs, s.target, optimum, gap);
  std::printf(
      "| method | seeds at target | time to target (%s) | vs %s | proposed at (%s) | best "
      "27-epoch loss at budget | trials | trained to 27 | GPUs busy | tuner s/run |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      unit_name, methods[ref]->name.c_str(), unit_name);
  for (size_t k = 0; k < methods.size(); ++k) {
    const Summary& su = sums[k];
    const double t = Quantile(su.ttt, 0.5);
    std::string ratio;
    if (!std::isfinite(ref_ttt))
      ratio = "n/a";
    else if (std::isfinite(t))
      ratio = FormatShort(t / ref_ttt, 3) + "x";
    else
      ratio = "> " + FormatShort(s.horizon_s / ref_ttt, 3) + "x";
    std::printf(
        "| %s | %d/%d | %s [%s, %s] | %s | %s | %s [%s, %s] | %.0f | %.0f | %.0f%% | %.2f |\n",
        methods[k]->name.c_str(), su.reached, s.seeds, Time(t, unit).c_str(),
        Time(Quantile(su.ttt, 0.25), unit).c_str(), Time(Quantile(su.ttt, 0.75), unit).c_str(),
        ratio.c_str(), Time(Quantile(su.proposed, 0.5), unit).c_str(),
        Loss(Quantile(su.best, 0.5)).c_str(), Loss(Quantile(su.best, 0.25)).c_str(),
        Loss(Quantile(su.best, 0.75)).c_str(), Quantile(su.trials, 0.5), Quantile(su.full, 0.5),
        100 * Quantile(su.busy, 0.5), Quantile(su.tuner, 0.5));
  }

  PrintGoals(s, methods, sums);
}

// The goals: gp+asha reaches the target >= 3x sooner than gp and >= 5x sooner than random, with
// the same or a better final value.
void PrintGoals(const Settings& s, const std::vector<const Method*>& methods,
                const std::vector<Summary>& sums) {
  auto find = [&](const std::string& name) -> const Summary* {
    for (size_t k = 0; k < methods.size(); ++k)
      if (methods[k]->name == name) return &sums[k];
    return nullptr;
  };
  const Summary* asha = find("gp+asha");
  if (asha != nullptr) {
    std::printf("\n");
    for (auto [name, factor] : {std::pair<const char*, double>{"gp", 3.0}, {"random", 5.0}}) {
      const Summary* other = find(name);
      if (other == nullptr) continue;
      const double a = Quantile(asha->ttt, 0.5), o = Quantile(other->ttt, 0.5);
      const double fa = Quantile(asha->best, 0.5), fo = Quantile(other->best, 0.5);
      const bool sooner = std::isfinite(a) && (!std::isfinite(o) || o >= factor * a);
      const bool final_ok = fa <= fo;
      std::string ratio = "gp+asha never";
      if (std::isfinite(a))
        ratio = std::isfinite(o) ? FormatShort(o / a, 3) + "x"
                                 : "> " + FormatShort(s.horizon_s / a, 3) + "x";
      std::printf(
          "Goal: gp+asha reaches the target >= %gx sooner than %s (%s) with the same or a better "
          "final value (%s against %s): %s\n",
          factor, name, ratio.c_str(), Loss(fa).c_str(), Loss(fo).c_str(),
          sooner && final_ok ? "met" : "NOT met");
    }
  }
}

int Main(int argc, char** argv) {
  Args a;
  if (int status = ParseArgs(argc, argv, &a); status != 0) return status < 0 ? 0 : status;
  Settings& s = a.s;
  const int gpus = s.nodes * s.gpus_per_node;
  double optimum = 0, trial_gpu_s = 0;
  if (a.table) {
    s.table = &*a.table;
    if (!a.reruns.empty()) s.reruns = &a.reruns;
    if (!a.draw_curves.empty()) s.draw_curves = &a.draw_curves;
    s.max_epochs = a.table->epochs();
    s.overhead_s = a.start_cost.value_or(a.table->MeanFullSeconds() / 10);
    optimum = a.table->BestFinalError();
    trial_gpu_s = a.table->MeanFullSeconds() + s.overhead_s;
  } else {
    s.overhead_s = a.start_cost.value_or(s.overhead_s);
    optimum = GlobalOptimum(s.max_epochs, s.speedup);
    trial_gpu_s = MeanFullTrialGpuSeconds(s.max_epochs, s.overhead_s);
  }
  s.target = optimum + a.gap;
  s.horizon_s = a.budget_trials * trial_gpu_s / gpus;

  const Clock::time_point start = Clock::now();
  std::vector<RunResult> results;
  if (!RunAll(s, a.methods, a.threads, &results)) return 1;
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (!a.json_path.empty() && !WriteRuns(a.json_path, s, a.methods, results, optimum, gpus)) {
    std::cerr << "asha_bench: --json: cannot write " << a.json_path << "\n";
    return 1;
  }
  Print(s, a.methods, Summarise(s, a.methods.size(), results), a.budget_trials, trial_gpu_s,
        optimum, a.gap);
  std::fprintf(stderr, "asha_bench: %zu runs in %.1f s\n", results.size(), wall);
  return 0;
}

}  // namespace
}  // namespace hyperpack::bench

int main(int argc, char** argv) { return hyperpack::bench::Main(argc, argv); }
