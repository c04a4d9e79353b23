// Pruners: which trials to stop early, and (ASHA's promote mode) which paused trials to continue.
//
// A trial reports its objective at increasing amounts of a resource (epochs, or steps). A Pruner
// answers each report with continue, stop (the trial is pruned) or pause (the trial has trained
// to its rung; it keeps its checkpoint and waits to be promoted). Values are compared in the
// study's direction.
//   none       never stops anything;
//   median     stops a trial whose best value so far is worse than the median of the earlier
//              completed trials' values at the same step, after warmup_steps and once
//              startup_trials have completed (Optuna's MedianPruner); never at max_resource
//              (when set, > 0), a trial's last report;
//   asha       rungs at min_resource x eta^k (and max_resource). mode stop: a trial reaching a rung
//              continues only if it is in the top 1/eta of that rung so far (at least the best one
//              continues). mode promote: every trial trains to its rung and pauses; a paused trial
//              is promoted to the next rung as soon as it ranks in the top 1/eta of its rung (Li et
//              al., "A System for Massively Parallel Hyperparameter Tuning", 2020);
//   hyperband  ASHA brackets with minimum resources min_resource x eta^s, s = 0, 1, ...; new trials
//              go to the brackets in turn;
//   forecast   at ASHA's rungs below max_resource, once startup_trials have completed: the
//              completed trials' values there and at their end, related by a least-squares line
//              (in logs where every value is positive; trials that ended far worse than a robust
//              line says, diverged after the rung, set aside), forecast the trial's final value
//              as a normal; the trial stops when the chance that it ends better than the best
//              completed trial is below `probability` (0.05) and its value is worse than the
//              completed trials' median there. Learning-curve prediction in the manner of Domhan
//              et al. (IJCAI 2015), from the study's own curves: a slow starter that the
//              completed trials say can still win goes on, where ASHA ranks by the rung alone.
//              Before startup_trials have completed, from the second rung on, a trial worse than
//              the median of the trials that have reached the rung (4 at least) stops;
// Thread-safety: not thread-safe; one owner (the runner's io thread, or a simulation).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::tuner {

enum class PrunerAlgorithm { kNone, kMedian, kAsha, kHyperband, kForecast };
const char* PrunerAlgorithmName(PrunerAlgorithm algorithm);  // "none", "median", "asha", ...
Result<PrunerAlgorithm> ParsePrunerAlgorithm(std::string_view name);

// asha, hyperband: stop a trial outside the top 1/eta at its rung, or pause every trial at its
// rung and promote the best.
enum class PrunerMode { kStop, kPromote };
const char* PrunerModeName(PrunerMode mode);  // "stop", "promote"
Result<PrunerMode> ParsePrunerMode(std::string_view name);

struct PrunerOptions {
  PrunerAlgorithm algorithm = PrunerAlgorithm::kNone;
  double min_resource = 1;
  double max_resource = 27;
  double reduction_factor = 3;
  PrunerMode mode = PrunerMode::kStop;
  double warmup_steps = 0;    // median
  int startup_trials = 5;     // median, forecast
  double probability = 0.05;  // forecast: stop below this chance of beating the best
  bool maximize = false;
  // asha, hyperband with several objectives (2 to 4): each one's direction (true: maximised), in
  // the order ReportObjectives takes them. A rung then ranks its trials by non-dominated sorting,
  // then crowding distance within a front (the most isolated first), then trial number.
  std::vector<bool> objectives;
};

struct PrunerDecision {
  enum class Kind { kContinue, kStop, kPause };
  Kind kind = Kind::kContinue;
  std::string reason;  // for stop and pause: which rung or median, and the values compared
  // Set when this report recorded the trial at a rung (asha, hyperband): the rung's resource. A
  // tuner learns the value at that fidelity.
  std::optional<double> rung;
};

class Pruner {
 public:
  virtual ~Pruner() = default;
  // A trial starts (or resumes); the resource it should train to: max_resource, or in promote
  // mode its next rung.
  virtual double Begin(int trial) = 0;
  // The trial reported `value` after `resource` (its epochs or steps).
  virtual PrunerDecision Report(int trial, double resource, double value) = 0;
  // With several objectives (PrunerOptions::objectives): the trial's value of each, in order; one
  // that lacks a value (NaN) ranks last. Pruners that compare one value judge the first.
  virtual PrunerDecision ReportObjectives(int trial, double resource,
                                          std::span<const double> values) {
    return Report(trial, resource, values.empty() ? 0.0 : values[0]);
  }
  // The trial ended for good: completed (true) or stopped, failed, lost (false).
  virtual void End(int trial, bool completed) = 0;
  // Promote mode: a paused trial that may continue now, the best-placed first, and the resource
  // to train it to; nullopt when there is none. It counts as promoted once returned.
  struct Promotion {
    int trial;
    double target;
  };
  virtual std::optional<Promotion> NextPromotion() = 0;
  // Promote mode, when no new trial may start and nothing runs: the paused trial at the highest
  // rung with the best value there, promoted whether or not it is in the top 1/eta (so that a
  // study whose budget is spent still trains one configuration to the end); nullopt when none.
  virtual std::optional<Promotion> ForcePromotion() { return std::nullopt; }
  // The trial was told to pause but cannot (its command wrote no checkpoint): from now on it is
  // judged as in stop mode, beginning with the rung it just reached. Returns that judgement.
  virtual PrunerDecision CannotPause(int trial) { return {}; }
  // Replaying a study after a crash: the trial, paused at its rung, had been promoted (it reported
  // beyond the rung, or was running again when the runner stopped).
  virtual void Promoted(int trial) {}
  // The rungs of bracket 0 (for reports and tests).
  virtual std::vector<double> Rungs() const = 0;
  virtual bool pauses() const { return false; }
};

// Errors: an unknown algorithm or mode, or resources that do not make rungs.
Result<std::unique_ptr<Pruner>> MakePruner(const PrunerOptions& options);

}  // namespace hyperpack::tuner
