// asha_bench: early stopping (ASHA, Hyperband, median) against full training, on synthetic
// learning curves, in virtual time.
//
//   asha_bench [--seeds 20] [--methods gp+asha,gp,random,...] [--budget-trials 40]
//              [--target-gap 0.02] [--cluster 1x8|2x4] [--speedup 0] [--learn-ladder=false]
//              [--threads 1]
//
// Every method runs the same loop on the same seeds: a cluster of 8 GPUs (one node of 8, or two of
// 4), the scheduler's real placement code (best fit with backfill), the tuner's real GP or random
// search, and the real pruners. Time is virtual: an event queue of epoch ends, so a seed of a
// three-hour study takes a fraction of a second plus the time spent in the tuner. Whenever GPUs
// are free, paused trials that the pruner promotes are resubmitted first (priority 1), then new
// configurations are proposed one at a time (with the running and queued ones pending) until the
// queued demand covers the free GPUs (priority 0). A run ends at the budget: 8 GPUs for as long as
// `--budget-trials` (40) full-length trials of the average configuration of the space take, in
// GPU-seconds; about 2.8 hours of virtual time.
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
// The noise is seeded by the benchmark seed and the configuration (and the epoch), so that two
// methods that try the same configuration on the same seed see the same curve.
//
// Methods: gp+asha (GP tuner, ASHA promote: trials train to a rung and pause until they rank in
// the top 1/3 there), gp+asha-stop (ASHA stop mode), gp+hyperband (promote mode), gp+median, gp
// (every trial trained to 27 epochs), random+asha, random. Rungs 1, 3, 9, 27 epochs (eta 3); the
// median pruner with its defaults (5 completed trials before it stops any, no warm-up). As the
// runner does: every trial's value at 1, 3 and 9 epochs (the first bracket's ladder) is observed
// by the tuner as a pruned outcome at that resource (the GP then models the highest rung with
// enough values: BOHB's rule), whether the trial continues, pauses or stops; a trial the median
// pruner stops, at the step where it stopped; a trial that reaches 27 epochs, as completed. With
// --learn-ladder=false only the values the pruner records at the rungs of the trial's own bracket
// are learnt (Hyperband's later brackets have no rung at 1 or 3 epochs).
//
// Measured per seed, and summarised by the median and quartiles over seeds:
//   time to target   the virtual time at which a trial first *completes 27 epochs* with a true
//                    (noise-free) loss at 27 epochs within --target-gap (0.02) of the global
//                    optimum of that loss; a low-fidelity value never counts, so pruning cannot
//                    win on early noise. A seed that never gets there counts as infinitely late.
//   proposed at      when the trial that first reached the target was proposed: the rest of
//                    the time to target is its own training (and, in promote mode, its waits
//                    to be promoted).
//   best at budget   the lowest true loss at 27 epochs among the trials that completed 27 epochs
//                    before the budget ran out.
// The table goes to stdout (markdown), progress to stderr, one line per method and seed.
// Exit status: 0, 1 when a tuner or pruner fails, 2 for bad flags.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cxxopts.hpp>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "hyperpack/scheduler/placement.h"
#include "hyperpack/space.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/pruner.h"
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
constexpr int kCpusPerRank = 4;  // CPU slots per rank (32 per 8-GPU node)

struct Hp {
  double lr = 0, batch = 0, momentum = 0, weight_decay = 0;
  int dp = 1;
};

double Number(const Config& c, const std::string& name) {
  auto it = c.find(name);
  return it == c.end() ? 0.0 : ValueAsNumber(it->second).value_or(0.0);
}

Hp FromConfig(const Config& c) {
  return Hp{Number(c, "lr"), Number(c, "batch_size"), Number(c, "momentum"),
            Number(c, "weight_decay"), static_cast<int>(Number(c, "data_parallel"))};
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
  return kEpochBase * (0.5 + 64.0 / h.batch) / speedup * (spans_nodes ? kSpanPenalty : 1.0);
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

SearchSpace MakeSpace() {
  auto num = [](const char* name, ParamType type, double low, double high, bool log) {
    ParamSpec p;
    p.name = name;
    p.type = type;
    p.low = low;
    p.high = high;
    p.log = log;
    return p;
  };
  ParamSpec dp;
  dp.name = "data_parallel";
  dp.type = ParamType::kCategorical;
  dp.values = {Value{int64_t{1}}, Value{int64_t{2}}, Value{int64_t{4}}};
  return SearchSpace({num("lr", ParamType::kFloat, 1e-4, 1.0, true),
                      num("batch_size", ParamType::kInt, 32, 1024, true),
                      num("momentum", ParamType::kFloat, 0.5, 0.99, false),
                      num("weight_decay", ParamType::kFloat, 1e-6, 1e-2, true), dp});
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
  std::string tuner;   // gp | random
  std::string pruner;  // none | median | asha | hyperband
  std::string mode;    // stop | promote
};

const std::vector<Method>& AllMethods() {
  static const std::vector<Method> methods = {{"gp+asha", "gp", "asha", "promote"},
                                              {"gp+asha-stop", "gp", "asha", "stop"},
                                              {"gp+hyperband", "gp", "hyperband", "promote"},
                                              {"gp+median", "gp", "median", "stop"},
                                              {"gp", "gp", "none", "stop"},
                                              {"random+asha", "random", "asha", "promote"},
                                              {"random", "random", "none", "stop"}};
  return methods;
}

struct Settings {
  int seeds = 20;
  double max_epochs = 27;
  double min_epochs = 1;
  double eta = 3;
  double overhead_s = 30;
  double speedup = 0;  // see TrueLoss
  bool learn_ladder = false;
  double horizon_s = 0;  // virtual seconds
  double target = 0;     // true loss at max_epochs
  int nodes = 1;
  int gpus_per_node = 8;
};

struct RunResult {
  double time_to_target = kInf;   // virtual seconds
  double target_proposed = kInf;  // when the trial that reached the target was proposed
  double best_full = kInf;        // true loss at max_epochs, best completed trial
  int trials = 0;                 // configurations started
  int full_trials = 0;            // trained to max_epochs
  double gpu_busy_s = 0;          // GPU-seconds allocated to jobs, within the horizon
  double tuner_s = 0;             // real time in Propose and Observe
};

class Simulation {
 public:
  Simulation(const Settings& s, const Method& m, int seed)
      : s_(s),
        m_(m),
        seed_(static_cast<uint64_t>(seed)),
        space_(MakeSpace()),
        cluster_(Nodes(s)),
        scheduler_(&cluster_, hs::Policy::kBestFit) {}

  Result<RunResult> Run() {
    ht::TunerOptions to;
    to.algorithm = m_.tuner;
    to.seed = seed_;
    to.maximize = false;
    HP_ASSIGN_OR_RETURN(tuner_, ht::MakeTuner(space_, to));
    ht::PrunerOptions po;
    po.algorithm = m_.pruner;
    po.mode = m_.mode;
    po.min_resource = s_.min_epochs;
    po.max_resource = s_.max_epochs;
    po.reduction_factor = s_.eta;
    HP_ASSIGN_OR_RETURN(pruner_, ht::MakePruner(po));
    for (double r : pruner_->Rungs())
      if (r < s_.max_epochs - 1e-9) ladder_.push_back(r);

    HP_RETURN_IF_ERROR(Fill(0.0));
    while (!events_.empty()) {
      Event ev = events_.top();
      if (ev.time > s_.horizon_s) break;
      events_.pop();
      HP_RETURN_IF_ERROR(OnEpoch(ev));
      HP_RETURN_IF_ERROR(Fill(ev.time));
    }
    // Jobs still running at the budget used their GPUs up to it.
    for (const Trial& t : trials_)
      if (t.state == State::kRunning) result_.gpu_busy_s += t.hp.dp * (s_.horizon_s - t.job_start);
    return result_;
  }

 private:
  enum class State { kQueued, kRunning, kPaused, kDone };
  struct Trial {
    Config config;
    Hp hp;
    uint64_t key = 0;
    double offset = 0;
    double proposed = 0;  // virtual time
    int epochs = 0;       // trained so far
    double target = 0;    // epochs this job trains to
    State state = State::kQueued;
    uint64_t job = 0;
    double job_start = 0;
    double epoch_s = 0;
  };
  struct Event {
    double time;
    uint64_t seq;
    int trial;
    int epoch;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };

  static std::vector<hs::Node> Nodes(const Settings& s) {
    std::vector<hs::Node> nodes;
    for (int i = 0; i < s.nodes; ++i)
      nodes.push_back(
          {"node" + std::to_string(i), s.gpus_per_node, kCpusPerRank * s.gpus_per_node});
    return nodes;
  }

  Status Submit(int id, int priority, double now) {
    Trial& t = trials_[id];
    hs::Job job;
    job.id = next_job_++;
    job.demand = hs::Demand{t.hp.dp, 1, kCpusPerRank};
    job.priority = priority;
    job.submit = now;
    job.estimate = s_.overhead_s + (t.target - t.epochs) * EpochSeconds(t.hp, false);
    HP_RETURN_IF_ERROR(scheduler_.Submit(job));
    t.state = State::kQueued;
    t.job = job.id;
    trial_of_job_[job.id] = id;
    queued_gpus_ += t.hp.dp;
    return Status::Ok();
  }

  void FinishJob(Trial& t, double now, State next) {
    scheduler_.Finish(t.job);
    result_.gpu_busy_s += t.hp.dp * (now - t.job_start);
    t.state = next;
  }

  void Observe(const Trial& t, ht::TrialOutcome::Kind kind, double value, double resource) {
    ht::TrialOutcome o;
    o.config = t.config;
    o.kind = kind;
    o.value = value;
    o.resource = resource;
    const Clock::time_point t0 = Clock::now();
    tuner_->Observe(o);
    result_.tuner_s += std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // Promotions first, then new configurations for the free GPUs, then a scheduling pass.
  Status Fill(double now) {
    if (now < s_.horizon_s) {
      if (pruner_->pauses()) {
        while (auto up = pruner_->NextPromotion()) {
          Trial& t = trials_[up->trial];
          if (t.state != State::kPaused)
            return Status::Internal("promoted trial ", up->trial, " is not paused");
          t.target = pruner_->Begin(up->trial);
          if (t.target != up->target)
            return Status::Internal("Begin gave ", t.target, ", the promotion ", up->target);
          HP_RETURN_IF_ERROR(Submit(up->trial, 1, now));
        }
      }
      while (cluster_.total_free_gpus() - queued_gpus_ > 0) {
        std::vector<Config> pending;
        for (const Trial& t : trials_)
          if (t.state == State::kQueued || t.state == State::kRunning) pending.push_back(t.config);
        const Clock::time_point t0 = Clock::now();
        Result<std::vector<Config>> proposed = tuner_->Propose(1, pending);
        result_.tuner_s += std::chrono::duration<double>(Clock::now() - t0).count();
        if (!proposed.ok()) return proposed.status().WithContext("Propose");
        if (proposed->empty()) break;
        const int id = static_cast<int>(trials_.size());
        Trial t;
        t.config = std::move(proposed->front());
        HP_RETURN_IF_ERROR(space_.Validate(t.config));
        t.hp = FromConfig(t.config);
        t.key = Mix64(seed_ ^ Mix64(ConfigHash(t.config)));
        t.offset = kOffsetSd * Normal(t.key);
        t.proposed = now;
        trials_.push_back(std::move(t));
        trials_[id].target = pruner_->Begin(id);
        ++result_.trials;
        HP_RETURN_IF_ERROR(Submit(id, 0, now));
      }
    }
    for (const hs::Scheduler::Started& st : scheduler_.Schedule(now)) {
      Trial& t = trials_[trial_of_job_.at(st.job.id)];
      t.state = State::kRunning;
      t.job_start = now;
      t.epoch_s = EpochSeconds(t.hp, st.placement.Nodes().size() > 1);
      queued_gpus_ -= t.hp.dp;
      events_.push(
          {now + s_.overhead_s + t.epoch_s, seq_++, trial_of_job_.at(st.job.id), t.epochs + 1});
    }
    return Status::Ok();
  }

  Status OnEpoch(const Event& ev) {
    Trial& t = trials_[ev.trial];
    t.epochs = ev.epoch;
    const double e = ev.epoch;
    const double value = TrueLoss(t.hp, e, t.offset, s_.speedup) +
                         kNoiseSd * Normal(t.key ^ Mix64(0x1000 + ev.epoch));
    const ht::PrunerDecision d = pruner_->Report(ev.trial, e, value);
    if (e >= s_.max_epochs - 1e-9) {
      Observe(t, ht::TrialOutcome::Kind::kCompleted, value, 0);
      pruner_->End(ev.trial, true);
      FinishJob(t, ev.time, State::kDone);
      ++result_.full_trials;
      const double truth = TrueLoss(t.hp, s_.max_epochs, t.offset, s_.speedup);
      result_.best_full = std::min(result_.best_full, truth);
      if (truth <= s_.target && !std::isfinite(result_.time_to_target)) {
        result_.time_to_target = ev.time;
        result_.target_proposed = t.proposed;
      }
      return Status::Ok();
    }
    // A value the pruner recorded at a rung is learnt at that fidelity, whatever the decision;
    // with --learn-ladder every value at a rung of the first bracket's ladder.
    std::optional<double> rung = d.rung;
    if (s_.learn_ladder && (m_.pruner == "asha" || m_.pruner == "hyperband"))
      for (double r : ladder_)
        if (std::abs(r - e) < 1e-9) rung = r;
    const bool at_rung = rung.has_value();
    if (at_rung) Observe(t, ht::TrialOutcome::Kind::kPruned, value, *rung);
    switch (d.kind) {
      case ht::PrunerDecision::Kind::kStop:
        if (!at_rung) Observe(t, ht::TrialOutcome::Kind::kPruned, value, e);
        pruner_->End(ev.trial, false);
        FinishJob(t, ev.time, State::kDone);
        return Status::Ok();
      case ht::PrunerDecision::Kind::kPause:
        FinishJob(t, ev.time, State::kPaused);
        return Status::Ok();
      case ht::PrunerDecision::Kind::kContinue:
        if (e >= t.target - 1e-9)
          return Status::Internal("trial ", ev.trial, " reached its target ", t.target,
                                  " and was neither paused nor stopped");
        events_.push({ev.time + t.epoch_s, seq_++, ev.trial, ev.epoch + 1});
        return Status::Ok();
    }
    return Status::Ok();
  }

  const Settings& s_;
  const Method& m_;
  uint64_t seed_;
  SearchSpace space_;
  hs::ClusterState cluster_;
  hs::Scheduler scheduler_;
  std::unique_ptr<ht::Tuner> tuner_;
  std::unique_ptr<ht::Pruner> pruner_;
  std::vector<double> ladder_;  // the first bracket's rungs below max_epochs
  std::vector<Trial> trials_;
  std::map<uint64_t, int> trial_of_job_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_job_ = 1, seq_ = 0;
  int queued_gpus_ = 0;
  RunResult result_;
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

std::string Hours(double s) { return std::isfinite(s) ? FormatShort(s / 3600.0, 3) : "never"; }
std::string Loss(double x) { return std::isfinite(x) ? FormatShort(x, 4) : "none"; }

int Main(int argc, char** argv) {
  std::vector<std::string> names;
  for (const Method& m : AllMethods()) names.push_back(m.name);
  cxxopts::Options options("asha_bench",
                           "Early stopping against full training on synthetic learning curves, "
                           "through the real scheduler, tuner and pruners, in virtual time");
  options.add_options()("seeds", "seeds 0 .. N-1", cxxopts::value<int>()->default_value("20"))(
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
      "threads", "runs in parallel (each run is deterministic either way)",
      cxxopts::value<int>()->default_value("1"))("h,help", "this help");
  Settings s;
  std::vector<const Method*> methods;
  double budget_trials = 0, gap = 0;
  int threads = 1;
  try {
    cxxopts::ParseResult args = options.parse(argc, argv);
    if (args.count("help")) {
      std::cout << options.help();
      return 0;
    }
    s.seeds = args["seeds"].as<int>();
    budget_trials = args["budget-trials"].as<double>();
    gap = args["target-gap"].as<double>();
    threads = args["threads"].as<int>();
    s.speedup = args["speedup"].as<double>();
    s.learn_ladder = args["learn-ladder"].as<bool>();
    const std::string cluster = args["cluster"].as<std::string>();
    if (cluster == "1x8") {
      s.nodes = 1;
      s.gpus_per_node = 8;
    } else if (cluster == "2x4") {
      s.nodes = 2;
      s.gpus_per_node = 4;
    } else {
      std::cerr << "asha_bench: --cluster is 1x8 or 2x4\n";
      return 2;
    }
    for (const std::string& n : args["methods"].as<std::vector<std::string>>()) {
      auto it = std::find_if(AllMethods().begin(), AllMethods().end(),
                             [&](const Method& m) { return m.name == n; });
      if (it == AllMethods().end()) {
        std::cerr << "asha_bench: --methods: unknown method '" << n << "'; expected one of "
                  << Join(names, ", ") << "\n";
        return 2;
      }
      methods.push_back(&*it);
    }
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "asha_bench: " << e.what() << "\n";
    return 2;
  }
  if (s.seeds < 1 || threads < 1 || !(budget_trials > 0) || !(gap > 0) || methods.empty()) {
    std::cerr << "asha_bench: --seeds, --threads, --budget-trials, --target-gap must be > 0 and "
                 "--methods not empty\n";
    return 2;
  }
  const int gpus = s.nodes * s.gpus_per_node;
  const double optimum = GlobalOptimum(s.max_epochs, s.speedup);
  s.target = optimum + gap;
  const double trial_gpu_s = MeanFullTrialGpuSeconds(s.max_epochs, s.overhead_s);
  s.horizon_s = budget_trials * trial_gpu_s / gpus;

  // Every (method, seed), spread over the threads; each run is independent.
  const size_t n_runs = methods.size() * static_cast<size_t>(s.seeds);
  std::vector<RunResult> results(n_runs);
  std::vector<std::string> errors(n_runs);
  std::atomic<size_t> next{0};
  std::mutex mu;
  const Clock::time_point start = Clock::now();
  auto worker = [&] {
    for (size_t i = next++; i < n_runs; i = next++) {
      const Method& m = *methods[i / static_cast<size_t>(s.seeds)];
      const int seed = static_cast<int>(i % static_cast<size_t>(s.seeds));
      const Clock::time_point t0 = Clock::now();
      Result<RunResult> r = Simulation(s, m, seed).Run();
      std::lock_guard<std::mutex> lock(mu);
      if (!r.ok()) {
        errors[i] = r.status().message();
        std::fprintf(stderr, "asha_bench: %s seed %d: %s\n", m.name.c_str(), seed,
                     errors[i].c_str());
        continue;
      }
      results[i] = *r;
      std::fprintf(stderr,
                   "asha_bench: %-12s seed %2d: target at %s h, best %s, %d trials (%d full), "
                   "%.2fs\n",
                   m.name.c_str(), seed, Hours(r->time_to_target).c_str(),
                   Loss(r->best_full).c_str(), r->trials, r->full_trials,
                   std::chrono::duration<double>(Clock::now() - t0).count());
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) return 1;
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  // Per method: the summaries over seeds.
  struct Summary {
    std::vector<double> ttt, proposed, best, trials, full, busy, tuner;
    int reached = 0;
  };
  std::vector<Summary> sums(methods.size());
  for (size_t i = 0; i < n_runs; ++i) {
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
  size_t ref = 0;
  for (size_t k = 0; k < methods.size(); ++k)
    if (methods[k]->name == "gp+asha") ref = k;
  const double ref_ttt = Quantile(sums[ref].ttt, 0.5);

  std::printf(
      "%d seeds, %d GPUs (%dx%d), budget %.2f h of virtual time (%.1f GPU-hours: %g average "
      "full-length trials of %.0f GPU-s), rungs %g..%g epochs, eta %g.\n"
      "Target: a trial trained to %g epochs with true loss <= %.4f (global optimum %.4f + %g). "
      "Median [quartiles] over seeds; 'never': the median seed did not reach it; 'proposed at': "
      "when "
      "the trial that first reached the target was proposed.\n\n",
      s.seeds, gpus, s.nodes, s.gpus_per_node, s.horizon_s / 3600, gpus * s.horizon_s / 3600,
      budget_trials, trial_gpu_s, s.min_epochs, s.max_epochs, s.eta, s.max_epochs, s.target,
      optimum, gap);
  std::printf(
      "| method | seeds at target | time to target (h) | vs %s | proposed at (h) | best 27-epoch "
      "loss "
      "at budget | trials | trained to 27 | GPUs busy | tuner s/run |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n",
      methods[ref]->name.c_str());
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
        methods[k]->name.c_str(), su.reached, s.seeds, Hours(t).c_str(),
        Hours(Quantile(su.ttt, 0.25)).c_str(), Hours(Quantile(su.ttt, 0.75)).c_str(), ratio.c_str(),
        Hours(Quantile(su.proposed, 0.5)).c_str(), Loss(Quantile(su.best, 0.5)).c_str(),
        Loss(Quantile(su.best, 0.25)).c_str(), Loss(Quantile(su.best, 0.75)).c_str(),
        Quantile(su.trials, 0.5), Quantile(su.full, 0.5), 100 * Quantile(su.busy, 0.5),
        Quantile(su.tuner, 0.5));
  }

  // The goals: gp+asha reaches the target >= 3x sooner than gp and >= 5x sooner than random, with
  // the same or a better final value.
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
  std::fprintf(stderr, "asha_bench: %zu runs in %.1f s\n", n_runs, wall);
  return 0;
}

}  // namespace
}  // namespace hyperpack::bench

int main(int argc, char** argv) { return hyperpack::bench::Main(argc, argv); }
