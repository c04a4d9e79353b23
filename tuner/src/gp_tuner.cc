// The Gaussian-process tuner: Bayesian optimisation over the encoded unit cube.
//
// Propose: a scrambled-Sobol initial design, then for each configuration asked for, the maximiser
// of log expected improvement (or UCB) under a GP fitted to the completed trials, times the
// probability of being feasible when some trials could not run. Pending trials (running, or
// proposed earlier in the same batch) enter as fantasies at the posterior mean (the "kriging
// believer"), appended to the Cholesky factor without refitting, so that a batch spreads out.
// The acquisition is maximised over a quasi-random candidate set plus perturbations of the best
// trials, and the best candidates are refined by L-BFGS-B on their continuous dimensions; integer
// and categorical values come only from real configurations, never from a relaxation: each of
// those starts then has its discrete parameters set in turn to their best value (every value of a
// small range, a spread and the neighbours of a large one) and its continuous ones refined again,
// for the best start.
// The length-scale prior (LengthScaleLevel) starts early: long scales, narrowly, while the model
// holds fewer than kEarlyTrialsPerDim trials per dimension (a joint model starts short), then
// short and wide.
// Objectives flat in pieces (an accuracy over a finite validation set): once the incumbent's
// value is shared by another trial (it sits on a plateau), the long level is a candidate: a model
// that keeps the trend across the pieces instead of explaining each piece locally, and that also
// learns each float and int dimension's scale (a Kumaraswamy input warp per dimension, gp.h), so
// that a fraction or a rate declared linear whose good values sit by one bound is stretched
// there, as a log scale would. From then on each refit fits both the long and the current early
// or short level and keeps the one with the higher joint density of data and hyperparameters
// (GaussianProcess::LogJointDensity): the data say whether a trend leads off the plateau or
// whether short scales explain it better, which no rule on ties could tell (docs/BENCHMARKS.md,
// stops 69-73). While the incumbent's value is shared, expected improvement is counted from one
// step below it, the smallest gap between distinct values seen: less cannot be observed. Ties
// elsewhere do not count: the worst values of many objectives tie (a model that predicts nothing
// scores log 10 on ten classes) where the region that matters is smooth; nor does a tie of every
// value, as when a random forest's whole initial design predicts nothing (stop 72). A continuous
// objective never repeats a value and is modelled as before (bench/tuner_regret).
// Cost-aware (EI-cool): a second GP on standardised log cost per unit of resource, fitted to the
// latest cost of each configuration, subtracts alpha x its mean from the acquisition.
// A pruner's rungs: by default the GP models the highest rung with enough values (BOHB), where a
// trial stopped below it counts as no better than that rung's median (StoppedBelowLevel); with
// FidelityModel::kJoint it models every rung's value with the fidelity as one more input, and the
// proposals query it at the full resource (TargetModel).

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "acquisition.h"
#include "feasibility.h"
#include "gp.h"
#include "median.h"
#include "output_transform.h"
#include "samplers.h"
#include "search.h"

namespace hyperpack::tuner {
namespace {

// Refit the hyperparameters at every proposal while data are few, then when the data have grown
// by this factor since the last fit.
constexpr int kAlwaysRefitBelow = 40;
// A first fit on more points than this makes its random restarts on this many (the best third
// and a random rest), then refines the best on all of them: a tenth of the time at 300 points.
constexpr int kColdFitPoints = 100;
constexpr int kPolishIterations = 20;
// SaveState's first word: its format's version.
constexpr char kStateTag[] = "gp2";
constexpr char kStateTagBeforeContests[] = "gp1";
constexpr double kRefitGrowth = 1.15;
// The objective model leaves the early length-scale level once it holds this many trials per
// encoded dimension: a few points per dimension before short scales can be told from noise
// (docs/BENCHMARKS.md, stop 69: against a flat 20 trials, level on Bayesmark's development half
// and no longer behind on branin).
constexpr int kEarlyTrialsPerDim = 5;
constexpr int kRefineStarts = 4;
// A discrete parameter with at most kSweepAll values has each tried in a sweep; a larger one
// kSweepSpread spread over its range and its value's neighbours.
constexpr int64_t kSweepAll = 64;
constexpr int kSweepSpread = 24;
constexpr int kSweepRounds = 1;
// Cost-aware proposals start once this many configurations have a cost.
constexpr int kMinCosts = 3;

// The objective model as proposals query it: at the full resource. Joint, the GP's last input is
// the fidelity and every query and fantasy is at 1; otherwise the GP is the model itself.
class TargetModel {
 public:
  TargetModel(GaussianProcess gp, bool joint) : gp_(std::move(gp)), joint_(joint) {}

  void Predict(const Eigen::MatrixXd& xs, Eigen::VectorXd* mean, Eigen::VectorXd* var) const {
    if (!joint_) return gp_.Predict(xs, mean, var);
    Eigen::MatrixXd lifted(xs.rows(), xs.cols() + 1);
    lifted << xs, Eigen::VectorXd::Ones(xs.rows());
    gp_.Predict(lifted, mean, var);
  }
  void PredictWithGradient(const Eigen::VectorXd& x, double* mean, double* var,
                           Eigen::VectorXd* dmean, Eigen::VectorXd* dvar) const {
    if (!joint_) return gp_.PredictWithGradient(x, mean, var, dmean, dvar);
    gp_.PredictWithGradient(Lift(x), mean, var, dmean, dvar);
    const Eigen::Index d = x.size();
    *dmean = dmean->head(d).eval();  // the fidelity is held at 1
    *dvar = dvar->head(d).eval();
  }
  Status Append(const Eigen::VectorXd& x, double y) { return gp_.Append(joint_ ? Lift(x) : x, y); }

 private:
  static Eigen::VectorXd Lift(const Eigen::VectorXd& x) {
    Eigen::VectorXd out(x.size() + 1);
    out << x, 1.0;
    return out;
  }

  GaussianProcess gp_;
  bool joint_;
};

struct Observation {
  Config config;
  Eigen::VectorXd x;
  TrialOutcome::Kind kind;
  std::optional<double> value;
  double level = 0;  // the resource of the value; +inf for a completed trial's final value
};

class GpTuner : public Tuner {
 public:
  GpTuner(const SearchSpace& space, const TunerOptions& options)
      : encoder_(space),
        options_(options),
        initial_(options.initial_trials > 0 ? options.initial_trials
                                            : std::max<int>(5, encoder_.dims() + 1)),
        sobol_(space, options.seed),
        joint_(options.fidelity_model == TunerOptions::FidelityModel::kJoint &&
               options.min_resource > 0 && options.max_resource > options.min_resource),
        scale_level_(joint_ ? LengthScaleLevel::kShort : LengthScaleLevel::kEarly) {
    // Which encoded dimensions a gradient may move: floats only (ints and categoricals are
    // chosen from real configurations).
    for (int d = 0; d < encoder_.dims(); ++d) {
      const ParamSpec& p = space.params()[encoder_.param_of_dim(d)];
      continuous_.push_back(p.type == ParamType::kFloat);
      if (p.type == ParamType::kFloat || p.type == ParamType::kInt) warp_dims_.push_back(d);
    }
    for (const ParamSpec& p : space.params())
      if (p.when) parents_.push_back(p.when->parent);
  }

  std::string name() const override { return "gp"; }

  // "gp2 LEVEL CONTESTED DIMS WARPED FITTED_N THETA... [RIVAL_LEVEL RIVAL_THETA...]": the model's
  // prior level, whether the long level contests it (0 or 1), the dimensions and warped ones,
  // the points the hyperparameters were fitted on, the hyperparameters packed (GpHyper::Pack),
  // and, contested, the losing level's last optimum, so that a tuner rebuilt from the state
  // proposes what the living one does. "gp1" states (before contests) end at THETA and have no
  // CONTESTED: a long level was one.
  std::string SaveState() const override {
    if (!gp_ || fitted_n_ == 0) return "";
    std::ostringstream out;
    out.precision(17);
    out << kStateTag << ' ' << static_cast<int>(scale_level_) << ' ' << (contested_ ? 1 : 0) << ' '
        << gp_->dims() << ' ' << gp_->prior().warp_dims.size() << ' ' << fitted_n_;
    for (double v : gp_->hyper().Pack()) out << ' ' << v;
    if (contested_ && rival_) {
      out << ' ' << static_cast<int>(rival_level_);
      for (double v : rival_->Pack()) out << ' ' << v;
    }
    return out.str();
  }

  void RestoreState(const std::string& state) override {
    std::istringstream in(state);
    std::string tag;
    int level = 0, contested = 0, dims = 0, fitted = 0;
    size_t warped = 0;
    if (!(in >> tag >> level)) return;
    if (tag == kStateTagBeforeContests) {
      contested = level == static_cast<int>(LengthScaleLevel::kLong);
    } else if (tag != kStateTag || !(in >> contested) || contested < 0 || contested > 1) {
      return;
    }
    if (!(in >> dims >> warped >> fitted) || dims != ModelDims() || fitted <= 0 || !Valid(level))
      return;
    const auto scale = static_cast<LengthScaleLevel>(level);
    if (PriorFor(scale).warp_dims.size() != warped) return;
    std::optional<GpHyper> hyper = ReadHyper(in, scale);
    if (!hyper) return;
    auto gp = std::make_unique<GaussianProcess>(dims, PriorFor(scale));
    if (!gp->SetHyper(*hyper).ok()) return;
    int rival = 0;
    std::optional<GpHyper> rival_hyper;
    if (tag == kStateTag && in >> rival) {
      if (!Valid(rival) || !(rival_hyper = ReadHyper(in, static_cast<LengthScaleLevel>(rival))))
        return;
    }
    gp_ = std::move(gp);
    scale_level_ = scale;
    contested_ = contested == 1;
    rival_ = rival_hyper;
    rival_level_ = static_cast<LengthScaleLevel>(rival);
    fitted_n_ = fitted;
    model_idx_.clear();
  }

  // A level a saved state may name for this tuner (a joint model is never early).
  bool Valid(int level) const { return level >= 0 && level <= 2 && !(joint_ && level == 2); }

  // A level's hyperparameters, packed, from a saved state; none if any is missing or not finite.
  std::optional<GpHyper> ReadHyper(std::istream& in, LengthScaleLevel level) const {
    const int dims = ModelDims();
    const int warped = static_cast<int>(PriorFor(level).warp_dims.size());
    Eigen::VectorXd theta(GpHyper::Size(dims, warped));
    for (Eigen::Index i = 0; i < theta.size(); ++i)
      if (!(in >> theta(i)) || !std::isfinite(theta(i))) return std::nullopt;
    return GpHyper::Unpack(theta, dims, warped);
  }

  void Observe(const TrialOutcome& outcome) override {
    sobol_.Observe(outcome);
    Observation o;
    o.config = outcome.config;
    std::vector<double> key = encoder_.Encode(outcome.config).x;
    o.x = ToEigen(key);
    o.kind = outcome.kind;
    o.value = outcome.value;
    o.level = outcome.kind == TrialOutcome::Kind::kCompleted || outcome.resource <= 0
                  ? std::numeric_limits<double>::infinity()
                  : outcome.resource;
    if (o.value && !std::isfinite(*o.value)) o.value.reset();
    if (o.value && options_.maximize) o.value = -*o.value;
    if (outcome.cost && std::isfinite(*outcome.cost) && *outcome.cost > 0) {
      ++costs_seen_;
      auto [it, added] = cost_index_.emplace(key, cost_x_.size());
      if (added) {
        cost_x_.push_back(o.x);
        cost_y_.push_back(std::log(*outcome.cost));
      } else {
        cost_y_[it->second] = std::log(*outcome.cost);
      }
    }
    trial_keys_.insert(std::move(key));
    observed_.push_back(std::move(o));
  }

  void SetBudgetSpent(double fraction) override { alpha_ = CostExponent(fraction); }

  std::optional<CostPrediction> PredictCost(const Config& config) const override {
    if (!cost_gp_) return std::nullopt;
    Eigen::VectorXd mean, var;
    cost_gp_->Predict(ToEigen(encoder_.Encode(config).x).transpose(), &mean, &var);
    const double noise = std::exp(cost_gp_->hyper().log_noise_var);
    CostPrediction p;
    p.median = std::exp(cost_mean_ + cost_scale_ * mean(0));
    p.log_sd = cost_scale_ * std::sqrt(std::max(0.0, var(0)) + noise);
    return p;
  }

  Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) override {
    std::vector<Config> out;
    if (n <= 0) return out;
    HP_RETURN_IF_ERROR(UpdateCostModel());
    int seen = static_cast<int>(observed_.size() + pending.size());
    ChooseLevel();
    int modelled = 0;
    for (const Observation& o : observed_) modelled += IsModelled(o);
    // The initial design, Sobol whenever the model has fewer than two points, and the trials that
    // random_fraction gives to the sequence.
    int from_sobol = modelled < 2 ? n : std::clamp(initial_ - seen, 0, n);
    from_sobol += SequenceShare(from_sobol, n - from_sobol, pending);
    // Until enough trials have a final value, a model of the few there are, or of lower rungs'
    // values (how fast a configuration learns), places worse than draws (initial_full_trials).
    if (CompletedValues() < options_.initial_full_trials) from_sobol = n;
    if (from_sobol > 0) {
      auto s = sobol_.Propose(from_sobol, pending);
      if (!s.ok()) return s;
      out = std::move(*s);
    }
    if (static_cast<int>(out.size()) == n || from_sobol == n) return out;

    std::vector<Config> all_pending(pending.begin(), pending.end());
    all_pending.insert(all_pending.end(), out.begin(), out.end());
    HP_RETURN_IF_ERROR(UpdateModel(seen, pending));
    auto more = ProposeFromModel(n - static_cast<int>(out.size()), all_pending, seen);
    if (!more.ok()) return more.status();
    for (Config& c : *more) out.push_back(std::move(c));
    return out;
  }

 private:
  // How many of the `n` proposals after the first `skip` of this call the sequence makes: trial t
  // (numbered from 0 in the order asked; a trial is a distinct configuration, observed or pending)
  // goes to it when i = t - initial_ >= 0 and floor((i + 1) f) > floor(i f), f = random_fraction,
  // which spreads the share evenly and depends only on the trials, so that a tuner rebuilt from
  // the study proposes as the living one does.
  int SequenceShare(int skip, int n, std::span<const Config> pending) const {
    const double f = options_.random_fraction;
    if (!(f > 0) || n <= 0) return 0;
    int trials = static_cast<int>(trial_keys_.size()) + skip;
    for (const Config& c : pending) trials += !trial_keys_.count(encoder_.Encode(c).x);
    int share = 0;
    for (int t = trials; t < trials + n; ++t) {
      const int i = t - initial_;
      share += i >= 0 && std::floor((i + 1) * f) > std::floor(i * f);
    }
    return share;
  }

  // How many observations are final values (of a trial trained to the full resource).
  int CompletedValues() const {
    return static_cast<int>(std::count_if(observed_.begin(), observed_.end(), [](const auto& o) {
      return o.value.has_value() && std::isinf(o.level);
    }));
  }

  // The value the objective model sees for observation i.
  double ValueOf(int i) const {
    auto it = stopped_.find(i);
    return it != stopped_.end() ? it->second : observed_[i].value.value_or(penalty_);
  }

  // Values at the chosen level only: a trial stopped at a lower fidelity has a different value.
  // Joint, every level's: the fidelity is an input.
  bool IsModelled(const Observation& o) const {
    return o.value.has_value() && (joint_ || o.level == level_) &&
           (o.kind == TrialOutcome::Kind::kCompleted || o.kind == TrialOutcome::Kind::kPruned);
  }

  // The GP's inputs: the encoding, and joint, the fidelity.
  int ModelDims() const { return encoder_.dims() + (joint_ ? 1 : 0); }
  Eigen::VectorXd ModelInput(const Observation& o) const {
    if (!joint_) return o.x;
    const double f = std::isinf(o.level)
                         ? 1.0
                         : std::clamp(std::log(o.level / options_.min_resource) /
                                          std::log(options_.max_resource / options_.min_resource),
                                      0.0, 1.0);
    Eigen::VectorXd out(o.x.size() + 1);
    out << o.x, f;
    return out;
  }
  // The inputs of observed_[idx[i]], one row each.
  Eigen::MatrixXd ModelInputs(const std::vector<int>& idx) const {
    Eigen::MatrixXd x(idx.size(), ModelDims());
    for (size_t i = 0; i < idx.size(); ++i) x.row(i) = ModelInput(observed_[idx[i]]).transpose();
    return x;
  }

  // The BOHB rule: the highest level (completed trials highest) with at least d + 2 values; else
  // the level with the most, so that the model starts as soon as any level has two.
  void ChooseLevel() {
    if (joint_) return;  // every level is modelled
    std::map<double, int> count;
    for (const Observation& o : observed_)
      if (o.value &&
          (o.kind == TrialOutcome::Kind::kCompleted || o.kind == TrialOutcome::Kind::kPruned))
        count[o.level]++;
    const int enough = encoder_.dims() + 2;
    double chosen = std::numeric_limits<double>::infinity();
    int most = 0;
    for (auto it = count.rbegin(); it != count.rend(); ++it) {
      if (it->second >= enough) {
        chosen = it->first;
        most = -1;
        break;
      }
      if (it->second > most) {
        most = it->second;
        chosen = it->first;
      }
    }
    level_ = chosen;
  }

  // Brings the objective model (and the feasibility model, when some trials were infeasible) up
  // to date with the observations.
  Status UpdateModel(int seen, std::span<const Config> pending) {
    // Infeasible trials enter the objective model at the worst value seen, a penalty that keeps
    // the model from promising improvements where nothing can run; the classifier does the rest.
    stopped_ = StoppedBelowLevel(pending);
    std::vector<int> idx;
    double worst = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(observed_.size()); ++i) {
      const Observation& o = observed_[i];
      if (IsModelled(o)) worst = std::max(worst, *o.value);
      if (IsModelled(o) || o.kind == TrialOutcome::Kind::kInfeasible || stopped_.count(i))
        idx.push_back(i);
    }
    penalty_ = worst;
    rng_.seed(Mix64(options_.seed ^ Mix64(0x9e0 + static_cast<uint64_t>(seen))));
    if (static_cast<int>(idx.size()) > options_.max_model_points)
      idx = Subset(idx, options_.max_model_points);

    Eigen::VectorXd raw(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) raw(i) = ValueOf(idx[i]);
    transform_.Fit(raw, options_.warp_outputs);
    Eigen::VectorXd y = transform_.Apply(raw);
    ReadValues(idx, y);
    if (!gp_) gp_ = std::make_unique<GaussianProcess>(ModelDims(), PriorFor(scale_level_));
    const int n = static_cast<int>(idx.size());
    bool refit = fitted_n_ == 0 || n < kAlwaysRefitBelow || n >= kRefitGrowth * fitted_n_;
    if (!refit && model_idx_.empty() && fitted_n_ < n) {
      // Restored: the living model was factored whole at its last fit and extended since.
      model_idx_.assign(idx.begin(), idx.begin() + fitted_n_);
      HP_RETURN_IF_ERROR(
          gp_->SetDataAndHyper(ModelInputs(model_idx_), y.head(fitted_n_), gp_->hyper()));
    }
    // The model's points are the first ones of idx when only new observations were appended.
    bool extends = !refit && !model_idx_.empty() && model_idx_.size() <= idx.size() &&
                   std::equal(model_idx_.begin(), model_idx_.end(), idx.begin());
    if (extends) {
      // Same hyperparameters, same first points: extend the factor, O(n^2) per new point.
      gp_->SetTargets(y.head(static_cast<Eigen::Index>(model_idx_.size())));
      for (size_t i = model_idx_.size(); i < idx.size(); ++i)
        HP_RETURN_IF_ERROR(
            gp_->Append(ModelInput(observed_[idx[i]]), y(static_cast<Eigen::Index>(i))));
    } else {
      const Eigen::MatrixXd x = ModelInputs(idx);
      if (refit && contested_) {
        HP_ASSIGN_OR_RETURN(const GpHyper hyper, FitHyperparameters(idx, y));
        HP_RETURN_IF_ERROR(Contest(x, idx, y, hyper));  // leaves the winner factored in gp_
      } else {
        GpHyper hyper = gp_->hyper();
        if (refit) {
          HP_ASSIGN_OR_RETURN(hyper, FitHyperparameters(idx, y));
        }
        HP_RETURN_IF_ERROR(gp_->SetDataAndHyper(x, y, hyper));
      }
      if (refit) fitted_n_ = n;
    }
    model_idx_ = idx;
    if (joint_) best_ = FullResourceIncumbent(idx);
    return UpdateFeasibility();
  }

  // Trials a pruner stopped below the modelled level (and not running or queued again): the last
  // value of each, by observation, as it enters the model at that level: no better than the median
  // value there, nor than its own. Left out, the model never learns where trials are stopped and
  // proposes that region again and again (TPE ranks pruned trials below completed ones for the
  // same reason). Joint: every level is modelled as it is.
  std::map<int, double> StoppedBelowLevel(std::span<const Config> pending) const {
    std::map<int, double> out;
    if (joint_) return out;
    std::vector<double> at_level;
    for (const Observation& o : observed_)
      if (IsModelled(o)) at_level.push_back(*o.value);
    if (at_level.empty()) return out;
    const double median = MedianOf(std::move(at_level));
    // By configuration: its highest observation below the level, unless one reached the level.
    std::map<std::vector<double>, int> last;
    std::set<std::vector<double>> reached;
    for (const Config& c : pending) reached.insert(encoder_.Encode(c).x);
    for (int i = 0; i < static_cast<int>(observed_.size()); ++i) {
      const Observation& o = observed_[i];
      std::vector<double> key(o.x.data(), o.x.data() + o.x.size());
      if (o.level >= level_) {
        reached.insert(std::move(key));
      } else if (o.kind == TrialOutcome::Kind::kPruned && o.value) {
        auto [it, added] = last.emplace(std::move(key), i);
        if (!added && observed_[it->second].level <= o.level) it->second = i;
      }
    }
    for (const auto& [key, i] : last)
      if (!reached.count(key)) out[i] = std::max(*observed_[i].value, median);
    return out;
  }

  // Joint: the best full-resource value the model predicts for a configuration it has seen (the
  // plug-in incumbent), so that expected improvement is counted at the resource it is asked at.
  double FullResourceIncumbent(const std::vector<int>& idx) const {
    Eigen::MatrixXd xs(idx.size(), encoder_.dims() + 1);
    for (size_t i = 0; i < idx.size(); ++i)
      xs.row(static_cast<Eigen::Index>(i)) << observed_[idx[i]].x.transpose(), 1.0;
    Eigen::VectorXd mean, var;
    gp_->Predict(xs, &mean, &var);
    return mean.size() > 0 ? mean.minCoeff() : std::numeric_limits<double>::infinity();
  }

  // The incumbent and the plateau margin from the model's targets y (of observed_[idx[i]]), and
  // the length-scale level: early, then from kEarlyTrialsPerDim trials per dimension on short;
  // once the incumbent's value is shared, the long level contests it at each refit (Contest) and
  // holds while it wins. A new level drops the model.
  void ReadValues(const std::vector<int>& idx, const Eigen::VectorXd& y) {
    // Infeasible trials' penalties are not values of the objective.
    // Joint: only full-resource values say where the objective is flat.
    std::vector<double> values;
    for (size_t i = 0; i < idx.size(); ++i)
      if (observed_[idx[i]].value && !stopped_.count(idx[i]) &&
          (!joint_ || std::isinf(observed_[idx[i]].level)))
        values.push_back(y(static_cast<Eigen::Index>(i)));
    std::sort(values.begin(), values.end());
    best_ = values.empty() ? std::numeric_limits<double>::infinity() : values.front();
    margin_ = PlateauMargin(values);
    if (base_level_ == LengthScaleLevel::kEarly &&
        static_cast<int>(idx.size()) >= kEarlyTrialsPerDim * encoder_.dims())
      base_level_ = LengthScaleLevel::kShort;
    if (!contested_ && IncumbentShared(values)) {
      contested_ = true;
      fitted_n_ = 0;  // the first contest at once
    }
    const LengthScaleLevel level =
        contested_ && scale_level_ == LengthScaleLevel::kLong ? scale_level_ : base_level_;
    if (level == scale_level_) return;
    scale_level_ = level;
    gp_.reset();
    fitted_n_ = 0;
    model_idx_.clear();
  }

  // The prior of a length-scale level; flat in pieces (long), the scale each numeric dimension is
  // declared on is learnt too. The fidelity is never warped.
  GpPrior PriorFor(LengthScaleLevel level) const {
    GpPrior prior = GpPrior::ForDims(ModelDims(), level);
    if (level == LengthScaleLevel::kLong) prior.warp_dims = warp_dims_;
    return prior;
  }

  // Fits the level that contests the model's (long against early or short, or the reverse) from
  // its last optimum, and leaves in gp_, factored on (x, y), whichever fit has the higher joint
  // density log p(y, theta) on the data; scale_level_ names it. `mine` is the model's own fit.
  Status Contest(const Eigen::MatrixXd& x, const std::vector<int>& idx, const Eigen::VectorXd& y,
                 const GpHyper& mine) {
    const LengthScaleLevel other =
        scale_level_ == LengthScaleLevel::kLong ? base_level_ : LengthScaleLevel::kLong;
    std::unique_ptr<GaussianProcess> own = std::move(gp_);
    const Status own_factored = own->SetDataAndHyper(x, y, mine);
    const int own_fitted = fitted_n_;
    gp_ = std::make_unique<GaussianProcess>(ModelDims(), PriorFor(other));
    // A warm start from the other level's last optimum; a cold fit (fitted_n_ 0) without one.
    const bool warm = rival_ && rival_level_ == other && gp_->SetHyper(*rival_).ok();
    if (!warm) fitted_n_ = 0;
    Result<GpHyper> theirs = FitHyperparameters(idx, y);
    fitted_n_ = own_fitted;
    const double own_density =
        own_factored.ok() ? own->LogJointDensity() : -std::numeric_limits<double>::infinity();
    if (theirs.ok() && gp_->SetDataAndHyper(x, y, *theirs).ok() &&
        gp_->LogJointDensity() > own_density) {
      rival_ = mine;
      rival_level_ = scale_level_;
      scale_level_ = other;
      return Status::Ok();
    }
    gp_ = std::move(own);
    if (theirs.ok()) {
      rival_ = *theirs;
      rival_level_ = other;
    }
    return own_factored;
  }

  // What expected improvement counts from: the incumbent, one plateau step below it when its
  // value is shared.
  double EiTarget() const { return best_ - margin_; }

  // The acquisition weighs cost: cost-aware, a cost GP, and budget left.
  bool CostTerm() const { return options_.cost_aware && cost_gp_ && alpha_ > 0; }

  // The cost GP, when costs are modelled and three are known: the most recent max_model_points
  // configurations, hyperparameters refitted as the objective's are (on the most recent
  // max_fit_points). Unchanged when no cost arrived since the last update.
  Status UpdateCostModel() {
    const int total = static_cast<int>(cost_y_.size());
    const bool wanted = options_.predict_costs || (options_.cost_aware && alpha_ > 0);
    if (!wanted || total < kMinCosts) {
      cost_gp_.reset();
      cost_fitted_n_ = 0;
      return Status::Ok();
    }
    if (cost_gp_ && cost_version_ == costs_seen_) return Status::Ok();
    cost_version_ = costs_seen_;
    const int d = encoder_.dims();
    const int n = std::min(total, options_.max_model_points);
    Eigen::MatrixXd x(n, d);
    Eigen::VectorXd y(n);
    for (int i = 0; i < n; ++i) {
      x.row(i) = cost_x_[total - n + i].transpose();
      y(i) = cost_y_[total - n + i];
    }
    const double mean = y.mean();
    const double sd = std::sqrt((y.array() - mean).square().sum() / n);
    cost_mean_ = mean;
    cost_scale_ = sd > 1e-6 ? sd : 1.0;  // costs all alike: no preference, whatever the scale
    y = (y.array() - mean).matrix() / cost_scale_;
    if (!cost_gp_) cost_gp_ = std::make_unique<GaussianProcess>(d, GpPrior::ForDims(d));
    bool refit = cost_fitted_n_ == 0 || n < kAlwaysRefitBelow || n >= kRefitGrowth * cost_fitted_n_;
    HP_RETURN_IF_ERROR(cost_gp_->SetData(x, y));
    if (!refit) return Status::Ok();
    const int m = std::min(n, options_.max_fit_points);
    GaussianProcess fit(d, cost_gp_->prior());
    HP_RETURN_IF_ERROR(fit.SetDataAndHyper(x.bottomRows(m), y.tail(m), cost_gp_->hyper()));
    GaussianProcess::FitOptions fo;
    fo.restarts = cost_fitted_n_ == 0 || m < 20 ? 2 : 0;
    HP_RETURN_IF_ERROR(fit.Fit(fo, rng_));
    cost_fitted_n_ = n;
    return cost_gp_->SetHyper(fit.hyper());
  }

  // The best third of `idx` (by value) and a random draw from the rest, `keep` in all, in their
  // original order.
  std::vector<int> Subset(const std::vector<int>& idx, int keep) {
    std::vector<int> by_value = idx;
    std::sort(by_value.begin(), by_value.end(),
              [&](int a, int b) { return ValueOf(a) < ValueOf(b); });
    int best = keep / 3;
    std::vector<int> rest(by_value.begin() + best, by_value.end());
    std::shuffle(rest.begin(), rest.end(), rng_);
    std::vector<int> out(by_value.begin(), by_value.begin() + best);
    out.insert(out.end(), rest.begin(), rest.begin() + (keep - best));
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<GpHyper> FitHyperparameters(const std::vector<int>& idx, const Eigen::VectorXd& y) {
    std::vector<int> pos(idx.size());
    std::iota(pos.begin(), pos.end(), 0);
    if (static_cast<int>(pos.size()) > options_.max_fit_points)
      pos = BestAndRandom(pos, y, options_.max_fit_points);
    GpHyper start = gp_->hyper();
    // Warm starts from the previous optimum need fewer random restarts.
    int restarts = fitted_n_ == 0 || pos.size() < 20 ? 2 : 0;
    if (fitted_n_ == 0 && static_cast<int>(pos.size()) > kColdFitPoints) {
      // A first fit on many points (a resumed study, an ask with no state kept): the restarts on
      // a subset, then one run from the best of them on every point.
      HP_ASSIGN_OR_RETURN(start, FitOn(idx, y, BestAndRandom(pos, y, kColdFitPoints), start, 2));
      GaussianProcess::FitOptions polish;
      polish.restarts = 0;
      polish.from_mode = false;
      polish.max_iterations = kPolishIterations;
      return FitOn(idx, y, pos, start, polish);
    }
    GaussianProcess::FitOptions fo;
    fo.restarts = restarts;
    return FitOn(idx, y, pos, start, fo);
  }

  // Positions into y: the best third of `keep`, and the rest drawn at random.
  std::vector<int> BestAndRandom(std::vector<int> pos, const Eigen::VectorXd& y, int keep) {
    std::sort(pos.begin(), pos.end(), [&](int a, int b) { return y(a) < y(b); });
    std::shuffle(pos.begin() + keep / 3, pos.end(), rng_);
    pos.resize(keep);
    return pos;
  }

  Result<GpHyper> FitOn(const std::vector<int>& idx, const Eigen::VectorXd& y,
                        const std::vector<int>& pos, const GpHyper& start, int restarts) {
    GaussianProcess::FitOptions fo;
    fo.restarts = restarts;
    return FitOn(idx, y, pos, start, fo);
  }

  // MAP hyperparameters on the points at `pos` (positions into idx and y), from `start`.
  Result<GpHyper> FitOn(const std::vector<int>& idx, const Eigen::VectorXd& y,
                        const std::vector<int>& pos, const GpHyper& start,
                        const GaussianProcess::FitOptions& fo) {
    std::vector<int> at(pos.size());
    Eigen::VectorXd ys(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) {
      at[i] = idx[pos[i]];
      ys(i) = y(pos[i]);
    }
    GaussianProcess fit(ModelDims(), gp_->prior());
    HP_RETURN_IF_ERROR(fit.SetDataAndHyper(ModelInputs(at), ys, start));
    HP_RETURN_IF_ERROR(fit.Fit(fo, rng_));
    return fit.hyper();
  }

  // Where configurations can run (feasibility.h): the modelled trials and the infeasible ones.
  Status UpdateFeasibility() {
    std::vector<int> idx;
    bool infeasible = false;
    for (int i = 0; i < static_cast<int>(observed_.size()); ++i) {
      const bool no = observed_[i].kind == TrialOutcome::Kind::kInfeasible;
      infeasible = infeasible || no;
      if (no || IsModelled(observed_[i])) idx.push_back(i);
    }
    if (!infeasible) {
      feasibility_.Clear();
      return Status::Ok();
    }
    if (static_cast<int>(idx.size()) > options_.max_fit_points) idx.resize(options_.max_fit_points);
    Eigen::MatrixXd x(idx.size(), encoder_.dims());
    std::vector<bool> ran;
    for (size_t i = 0; i < idx.size(); ++i) {
      x.row(i) = observed_[idx[i]].x.transpose();
      ran.push_back(observed_[idx[i]].kind != TrialOutcome::Kind::kInfeasible);
    }
    return feasibility_.Update(x, ran);
  }

  using Scored = ScoredPoint;

  // The acquisition at x under `model` (and the feasibility model), with its gradient.
  double Acquisition(const TargetModel& model, const Eigen::VectorXd& x,
                     Eigen::VectorXd* grad) const {
    double mean, var;
    Eigen::VectorXd dmean, dvar;
    model.PredictWithGradient(x, &mean, &var, &dmean, &dvar);
    double sd = std::sqrt(var);
    AcquisitionValue a = options_.acquisition == Acquisition::kUcb
                             ? UpperConfidenceBound(mean, sd, options_.ucb_beta)
                             : LogExpectedImprovement(mean, sd, EiTarget());
    double value = a.value;
    if (grad) *grad = a.dmean * dmean + a.dsigma * dvar / (2.0 * sd);
    if (CostTerm()) {
      // - alpha x log cost, up to a constant: the cost GP's mean is in standardised log units.
      double cm, cv;
      Eigen::VectorXd dcm, dcv;
      cost_gp_->PredictWithGradient(x, &cm, &cv, &dcm, &dcv);
      value -= alpha_ * cost_scale_ * cm;
      if (grad) *grad -= alpha_ * cost_scale_ * dcm;
    }
    if (feasibility_.active()) value += feasibility_.LogProbability(x, grad);
    return value;
  }

  // The acquisition at many points at once.
  Eigen::VectorXd AcquisitionBatch(const TargetModel& model, const Eigen::MatrixXd& xs) const {
    Eigen::VectorXd mean, var;
    model.Predict(xs, &mean, &var);
    Eigen::VectorXd out(xs.rows());
    for (Eigen::Index i = 0; i < xs.rows(); ++i) {
      double sd = std::sqrt(var(i));
      out(i) = options_.acquisition == Acquisition::kUcb
                   ? UpperConfidenceBound(mean(i), sd, options_.ucb_beta).value
                   : LogExpectedImprovement(mean(i), sd, EiTarget()).value;
    }
    if (CostTerm()) {
      Eigen::VectorXd cm, cv;
      cost_gp_->Predict(xs, &cm, &cv);
      out -= alpha_ * cost_scale_ * cm;
    }
    if (feasibility_.active()) out += feasibility_.LogProbabilities(xs);
    return out;
  }

  // Candidate configurations: a scrambled Sobol set over the whole space plus perturbations of
  // the best trials, each a real configuration encoded.
  std::vector<Eigen::VectorXd> Candidates(std::mt19937_64& rng, uint64_t salt) const {
    std::vector<Eigen::VectorXd> out = GlobalCandidates(encoder_, Mix64(options_.seed ^ salt));
    // Local: around the best few trials.
    std::vector<int> best;
    for (int i = 0; i < static_cast<int>(observed_.size()); ++i)
      if (IsModelled(observed_[i])) best.push_back(i);
    std::sort(best.begin(), best.end(),
              [&](int a, int b) { return *observed_[a].value < *observed_[b].value; });
    if (best.size() > 5) best.resize(5);
    std::vector<Config> centres;
    for (int b : best) centres.push_back(observed_[b].config);
    AddLocalCandidates(encoder_, centres, rng, &out);
    return out;
  }

  // Moves the continuous, active dimensions of `start` uphill on the acquisition.
  Scored Refine(const TargetModel& model, const Scored& start) const {
    return RefineContinuous(encoder_, continuous_, start,
                            [&](const Eigen::VectorXd& x, Eigen::VectorXd* grad) {
                              return Acquisition(model, x, grad);
                            });
  }

  // Values to try for discrete parameter `spec`: every one when there are few, else a spread over
  // the range and the three neighbours of `now` on each side.
  std::vector<Value> Alternatives(const ParamSpec& spec, const Value& now) const {
    if (spec.type == ParamType::kCategorical) return spec.values;
    // Integers first, made values at the end: GCC 12 warns (falsely) on a vector of variants
    // growing by one variant at a time here.
    std::vector<int64_t> out;
    const int64_t n = spec.Cardinality();
    const int64_t lo = static_cast<int64_t>(spec.low);
    if (n <= kSweepAll) {
      for (int64_t k = 0; k < n; ++k) out.push_back(lo + k * spec.step);
      return std::vector<Value>(out.begin(), out.end());
    }
    const double a = spec.log ? std::log(spec.low) : spec.low;
    const double b = spec.log ? std::log(spec.high) : spec.high;
    for (int i = 0; i < kSweepSpread; ++i) {
      double t = a + (i + 0.5) / kSweepSpread * (b - a);
      double v = spec.log ? std::exp(t) : t;
      int64_t k = std::llround((v - spec.low) / static_cast<double>(spec.step));
      out.push_back(lo + std::clamp<int64_t>(k, 0, n - 1) * spec.step);
    }
    const int64_t cur = std::get<int64_t>(now);
    for (int64_t d = -3; d <= 3; ++d) {
      int64_t v = cur + d * spec.step;
      if (v >= lo && v <= static_cast<int64_t>(spec.high)) out.push_back(v);
    }
    return std::vector<Value>(out.begin(), out.end());
  }

  // Coordinate sweeps over the discrete parameters of `start`: each int and each categorical on
  // which no condition depends is set in turn to its value of highest acquisition, then the
  // continuous dimensions are refined again; up to two rounds.
  Scored SweepDiscrete(const TargetModel& model, Scored start) const {
    const SearchSpace& space = encoder_.space();
    for (int round = 0; round < kSweepRounds; ++round) {
      bool moved = false;
      for (const ParamSpec& spec : space.params()) {
        if (spec.type != ParamType::kInt && spec.type != ParamType::kCategorical) continue;
        if (std::find(parents_.begin(), parents_.end(), spec.name) != parents_.end()) continue;
        Config c =
            encoder_.Decode(std::vector<double>(start.x.data(), start.x.data() + start.x.size()));
        auto it = c.find(spec.name);
        if (it == c.end()) continue;
        std::vector<Value> values = Alternatives(spec, it->second);
        Eigen::MatrixXd xs(values.size(), encoder_.dims());
        for (size_t i = 0; i < values.size(); ++i) {
          it->second = values[i];
          xs.row(i) = ToEigen(encoder_.Encode(c).x).transpose();
        }
        Eigen::VectorXd acq = AcquisitionBatch(model, xs);
        Eigen::Index best = 0;
        acq.maxCoeff(&best);
        if (acq(best) > start.acq + 1e-9) {
          start = {acq(best), xs.row(best).transpose()};
          moved = true;
        }
      }
      if (!moved) break;
      start = Refine(model, start);
    }
    return start;
  }

  // Already observed, or (nearly) the same as a pending trial or an earlier member of the batch.
  bool Taken(const Config& c, const Eigen::VectorXd& x, const std::vector<Config>& pending,
             const std::vector<Eigen::VectorXd>& pending_x) const {
    for (const Observation& o : observed_)
      if (SameConfig(o.config, c)) return true;
    return NearPending(c, x, pending, pending_x);
  }

  // Candidates under `model` by acquisition, best first: the best few distinct ones refined (the
  // best also swept over its discrete values) ahead of all of them unrefined, as fallbacks.
  std::vector<Scored> RankedCandidates(const TargetModel& model, uint64_t salt) const {
    std::mt19937_64 rng(Mix64(options_.seed ^ Mix64(0xac0 + salt)));
    std::vector<Eigen::VectorXd> cands = Candidates(rng, salt);
    Eigen::MatrixXd xs(cands.size(), encoder_.dims());
    for (size_t j = 0; j < cands.size(); ++j) xs.row(j) = cands[j].transpose();
    Eigen::VectorXd acq = AcquisitionBatch(model, xs);
    std::vector<Scored> scored;
    for (size_t j = 0; j < cands.size(); ++j) scored.push_back({acq(j), cands[j]});
    std::sort(scored.begin(), scored.end(),
              [](const Scored& a, const Scored& b) { return a.acq > b.acq; });
    std::vector<Scored> refined;
    for (size_t j = 0; j < scored.size() && static_cast<int>(refined.size()) < kRefineStarts; ++j) {
      bool distinct = true;
      for (const Scored& r : refined) distinct = distinct && (r.x - scored[j].x).norm() > 1e-6;
      // The discrete sweep for the best start only: it costs a batch of predictions per
      // discrete parameter and round.
      if (distinct)
        refined.push_back(refined.empty() ? SweepDiscrete(model, Refine(model, scored[j]))
                                          : Refine(model, scored[j]));
    }
    refined.insert(refined.end(), scored.begin(), scored.end());
    std::stable_sort(refined.begin(), refined.end(),
                     [](const Scored& a, const Scored& b) { return a.acq > b.acq; });
    return refined;
  }

  Result<std::vector<Config>> ProposeFromModel(int n, std::vector<Config> pending, int seen) {
    // Fantasies: pending configurations as if they had returned the posterior mean.
    TargetModel model(*gp_, joint_);
    std::vector<Eigen::VectorXd> pending_x;
    for (const Config& c : pending) {
      Eigen::VectorXd x = ToEigen(encoder_.Encode(c).x);
      pending_x.push_back(x);
      Eigen::VectorXd mean, var;
      model.Predict(x.transpose(), &mean, &var);
      HP_RETURN_IF_ERROR(model.Append(x, mean(0)));
      best_ = std::min(best_, mean(0));
    }
    std::vector<Config> out;
    for (int i = 0; i < n; ++i) {
      std::optional<Chosen> chosen = FirstUntaken(
          encoder_, RankedCandidates(model, static_cast<uint64_t>(seen + i)),
          [&](const Config& c, const Eigen::VectorXd& x) {
            return Taken(c, x, pending, pending_x);
          },
          sobol_, pending);
      if (!chosen) break;
      Eigen::VectorXd mean, var;
      model.Predict(chosen->x.transpose(), &mean, &var);
      // The kriging believer: the fantasy is data, and a fantasy better than the incumbent is
      // the new incumbent, so later members of the batch must improve on it.
      HP_RETURN_IF_ERROR(model.Append(chosen->x, mean(0)));
      best_ = std::min(best_, mean(0));
      pending.push_back(chosen->config);
      pending_x.push_back(chosen->x);
      out.push_back(std::move(chosen->config));
    }
    return out;
  }

  Encoder encoder_;
  TunerOptions options_;
  int initial_;
  SobolSampler sobol_;
  bool joint_;  // FidelityModel::kJoint with a resource range
  std::vector<bool> continuous_;
  std::vector<int> warp_dims_;  // the float and int dimensions: what input warping may stretch
  std::vector<std::string> parents_;  // parameters that a condition depends on
  std::vector<Observation> observed_;
  std::unique_ptr<GaussianProcess> gp_;
  FeasibilityModel feasibility_;
  std::vector<int> model_idx_;
  int fitted_n_ = 0;
  OutputTransform transform_;
  double best_ = 0;
  double margin_ = 0;             // PlateauMargin of the modelled values
  LengthScaleLevel scale_level_;  // set by the constructor: early, or short for a joint model
  // Early, then short from kEarlyTrialsPerDim trials per dimension (a joint model: short).
  LengthScaleLevel base_level_ = scale_level_;
  bool contested_ = false;  // the incumbent's value was shared: the long level contests the base
  std::optional<GpHyper> rival_;  // the level that lost the last contest: its optimum
  LengthScaleLevel rival_level_ = LengthScaleLevel::kShort;
  double level_ = std::numeric_limits<double>::infinity();
  double penalty_ = 0;             // the worst completed value: what an infeasible trial counts as
  std::map<int, double> stopped_;  // StoppedBelowLevel at the last model update
  std::mt19937_64 rng_;
  std::set<std::vector<double>> trial_keys_;  // each observed trial's encoding (SequenceShare)
  // Cost-aware: the latest log cost of each configuration (by its encoding), in order of first
  // report; the cost GP on them, standardised.
  std::map<std::vector<double>, size_t> cost_index_;
  std::vector<Eigen::VectorXd> cost_x_;
  std::vector<double> cost_y_;
  std::unique_ptr<GaussianProcess> cost_gp_;
  int cost_fitted_n_ = 0;
  double cost_mean_ = 0, cost_scale_ = 1;   // the log costs' mean and sd: the GP's units
  int costs_seen_ = 0, cost_version_ = -1;  // costs observed, and when the cost GP was updated
  double alpha_ = 1;                        // CostExponent(the budget spent)
};

}  // namespace

std::unique_ptr<Tuner> MakeGpTuner(const SearchSpace& space, const TunerOptions& options) {
  return std::make_unique<GpTuner>(space, options);
}

}  // namespace hyperpack::tuner
