// A Tuner proposes configurations for a study and learns from trials that ended.
//
// Ask/tell: the owner calls Propose when it has capacity and Observe whenever a trial ends. A
// tuner is deterministic: the same seed, space and sequence of calls give the same proposals, and a
// tuner rebuilt after a crash (the finished trials observed again) continues the sequence rather
// than repeating it.
// Thread-safety: not thread-safe. One owner calls it (the runner's io_context thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/tuner/cost_model.h"

namespace hyperpack::tuner {

enum class TunerAlgorithm { kGp, kRandom, kSobol };
const char* TunerAlgorithmName(TunerAlgorithm algorithm);  // "gp", "random", "sobol"
// Errors name the word and the choices.
Result<TunerAlgorithm> ParseTunerAlgorithm(std::string_view name);

// gp's acquisition: log expected improvement, or the upper (here lower) confidence bound.
enum class Acquisition { kEi, kUcb };
const char* AcquisitionName(Acquisition acquisition);  // "ei", "ucb"
Result<Acquisition> ParseAcquisition(std::string_view name);

struct TunerOptions {
  TunerAlgorithm algorithm = TunerAlgorithm::kGp;
  uint64_t seed = 0;
  bool maximize = false;  // direction of the objective; samplers ignore it, models do not
  // Several objectives (2 to 4): each one's direction (true: maximised), in the order of
  // TrialOutcome::values; `maximize` is then unused. gp models each and seeks the Pareto front.
  std::vector<bool> objectives;
  // How many constraints each outcome's `violations` holds; gp models each and weighs its
  // acquisition by the probability that all hold.
  int constraints = 0;
  // gp only:
  int initial_trials = 0;  // Sobol trials before the model; 0: max(5, dims + 1)
  Acquisition acquisition = Acquisition::kEi;
  double ucb_beta = 2.0;     // for ucb: mean - beta * sd
  bool warp_outputs = true;  // Yeo-Johnson power transform of the objective values
  // Past these many completed trials the hyperparameters are fitted on a subset, and the model
  // itself keeps a subset (the best third and a random rest): the cost is cubic in them.
  int max_fit_points = 300;
  int max_model_points = 1000;
  // gp only, one objective: the share of the proposals after the initial design that the Sobol
  // sequence makes instead of the model, spread evenly over the trials in the order they are
  // asked for (BOHB's random fraction). With a pruner a poor draw is stopped at its first rung,
  // so draws explore cheaply, and on real learning curves the model alone keeps training
  // configurations near its incumbent that differ by less than the validation noise
  // (docs/BENCHMARKS.md, issue 49). In [0, 1]; 0: the model makes every proposal.
  double random_fraction = 0;
  // gp only, one objective: every proposal is the Sobol sequence's until this many trials have a
  // final value (trained to the full resource). With a pruner most trials stop at a low rung; a
  // model of lower rungs' values ranks configurations by how fast they learn, and one of a few
  // final values places worse than draws (docs/BENCHMARKS.md, issue 49). 0: off.
  int initial_full_trials = 0;
  // gp only: EI-cool (Lee et al., "Cost-aware Bayesian optimization", 2020). Once three trials
  // have a cost, a second GP models log cost per unit of resource and the acquisition becomes
  // log EI - alpha x log predicted cost, alpha = CostExponent(the budget spent): cheap
  // configurations first, the best regardless of cost at the end.
  bool cost_aware = false;
  // gp only: keep the cost GP for PredictCost even when not cost-aware (a duration-aware queue).
  bool predict_costs = false;
  // gp only, with a pruner's rungs (TrialOutcome::resource): how values at several resources are
  // modelled. kHighestRung: a GP of the highest rung with d + 2 values (BOHB). kJoint: one GP of
  // (configuration, fidelity), the fidelity log(resource / min_resource) / log(max_resource /
  // min_resource) in [0, 1] and a completed trial's value at 1, queried at 1 (the full resource)
  // with expected improvement over the best predicted full-resource value of the trials seen
  // (MOBSTER, Klein et al. 2020): every rung's value informs the model, weighed by how far its
  // fidelity is from the end, as the model learns a length scale along it. kJoint needs
  // 0 < min_resource < max_resource, else it is kHighestRung.
  enum class FidelityModel { kHighestRung, kJoint };
  FidelityModel fidelity_model = FidelityModel::kHighestRung;
  double min_resource = 0;
  double max_resource = 0;
};

// EI-cool's alpha for the share of the budget spent (clamped to [0, 1]): 1 - spent, so 1 at the
// start and 0 when the budget is gone.
double CostExponent(double budget_spent);

struct TrialOutcome {
  enum class Kind { kCompleted, kPruned, kFailed, kInfeasible };
  Config config;
  Kind kind = Kind::kCompleted;
  std::optional<double> value;  // completed and pruned trials have one
  // With several objectives (TunerOptions::objectives): each one's value, in order (NaN: not
  // reported); `value` is then the first's.
  std::vector<double> values;
  // Each constraint's violation (TunerOptions::constraints): <= 0 holds, > 0 (or NaN) breaks it.
  std::vector<double> violations;
  // The resource (epochs, steps) the value was measured at; 0 for a completed trial's final value.
  // A pruner's rungs arrive as kPruned outcomes with their resource: the GP then models the
  // highest rung with at least d + 2 values (the BOHB rule).
  double resource = 0;
  // What reaching `value` cost per unit of `resource` (per trial where no resource is reported):
  // the wall time of its runs x the GPUs it held, or its CPU slots where it held none. The later
  // outcome of a configuration replaces an earlier one. Absent, or not finite and positive:
  // unknown.
  std::optional<double> cost;
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  // Up to `n` new configurations, distinct from each other, from `pending` (trials running now)
  // and from those observed, as far as the space allows: fewer come back only when a small
  // discrete space has run out of new configurations.
  virtual Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) = 0;
  // A trial ended.
  virtual void Observe(const TrialOutcome& outcome) = 0;
  // The share of the study's budget spent so far, in [0, 1]: the largest of trials started out of
  // max_trials, time out of the time limit, cost out of gpu_hours or core_hours. A cost-aware
  // tuner weighs cost by it; others ignore it. Until called: 0.
  virtual void SetBudgetSpent(double /*fraction*/) {}
  // What `config` will cost per unit of resource, as TrialOutcome::cost counts it, from the
  // costs observed up to the latest Propose; nullopt where the tuner models no cost (random,
  // sobol, gp neither cost-aware nor predict_costs) or knows fewer than three costs.
  virtual std::optional<CostPrediction> PredictCost(const Config& /*config*/) const {
    return std::nullopt;
  }
  // What the tuner learnt beyond its observations, as text to keep with the study (gp: the
  // model's fitted hyperparameters, its length-scale regime and how many points they were fitted
  // on), so that a tuner built anew from the same trials (`hyperpack ask`) starts where this one
  // stood instead of fitting from scratch, and proposes as it would have. "" where there is
  // nothing more (the samplers, and gp before its first model). RestoreState takes it before the
  // first Propose; a state of another space, tuner or version is ignored: the fit starts anew.
  virtual std::string SaveState() const { return ""; }
  virtual void RestoreState(const std::string& /*state*/) {}
  virtual std::string name() const = 0;
};

// An error for an unknown algorithm or a space it cannot handle.
Result<std::unique_ptr<Tuner>> MakeTuner(const SearchSpace& space, const TunerOptions& options);

}  // namespace hyperpack::tuner
