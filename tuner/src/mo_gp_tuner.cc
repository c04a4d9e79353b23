// The GP tuner for several objectives and for constraints (TunerOptions::objectives,
// TunerOptions::constraints).
//
// One GP per objective and one per constraint, each on standardised values of the completed
// trials, over the same encoding as the one-objective tuner, hyperparameters fitted by MAP while
// data are few and then as they grow (gp.h). The acquisition:
// - two objectives: log expected hypervolume improvement over the feasible trials' front, in
//   the models' standardised units, below a reference point 10% of each objective's observed range
//   beyond its worst value (acquisition.h: exact, over the boxes that cut up what the front
//   leaves, computed once per front);
// - three or four: ParEGO (Knowles 2006), which found more of DTLZ2's front than EHVI over the
//   same boxes in three objectives (docs/BENCHMARKS.md): each call to Propose draws a weight
//   vector from the
//   simplex, and one GP models the augmented Chebyshev scalarisation of the objectives (each
//   scaled to [0, 1] over the trials), under log expected improvement;
// - one objective with constraints: log expected improvement over the best feasible trial;
// plus, for each constraint, log P(it holds) under its GP, and once a trial could not run at all
// (exit 3), log P(it runs) under the feasibility classifier the one-objective tuner uses
// (feasibility.h). Until a trial is feasible, only those probabilities count: the search first
// finds where the constraints hold.
// The acquisition is maximised as the one-objective tuner does (search.h): a Sobol candidate set
// and perturbations of front members, the best few refined by L-BFGS-B on their continuous
// dimensions. Batches and pending trials: each pending configuration is a fantasy at every
// model's posterior mean (the kriging believer), and joins the front it would make.
// Values are standardised, not power-transformed: hypervolume is measured in the objectives' own
// units, and a transform would bend the front's geometry between them.
// Thread-safety: not thread-safe (tuner.h).

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "acquisition.h"
#include "feasibility.h"
#include "gp.h"
#include "median.h"
#include "output_transform.h"
#include "samplers.h"
#include "search.h"

namespace hyperpack::tuner {
// Named, not anonymous: the unity build puts this file beside gp_tuner.cc.
namespace multi_objective {

// The one-objective tuner's refit schedule (gp_tuner.cc): every proposal while data are few.
constexpr int kAlwaysRefitBelow = 40;
constexpr double kRefitGrowth = 1.15;
constexpr int kRefineStarts = 3;
constexpr int kLocalCentres = 5;
constexpr double kParEgoRho = 0.05;       // the augmented Chebyshev scalarisation's linear part
constexpr double kReferenceMargin = 0.1;  // the reference point: this share of the range beyond
constexpr double kMinSd = 1e-9;

struct Trial {
  Config config;
  Eigen::VectorXd x;
  bool completed = false;
  bool infeasible = false;         // it could not run here (exit 3, or too large for any node)
  std::vector<double> values;      // minimised; all finite, or empty
  std::vector<double> stopped;     // a pruned trial's last values, minimised; all finite, or empty
  std::vector<double> violations;  // finite, or +inf (not reported)
  bool Feasible() const {
    return std::all_of(violations.begin(), violations.end(), [](double v) { return v <= 0; });
  }
};

// A GP on standardised targets, refitted while data are few and then as they grow.
class Model {
 public:
  explicit Model(int dims) : gp_(dims, GpPrior::ForDims(dims)) {}

  Status Update(const Eigen::MatrixXd& x, const Eigen::VectorXd& raw, std::mt19937_64& rng) {
    transform_.Fit(raw, /*warp=*/false);
    HP_RETURN_IF_ERROR(gp_.SetData(x, transform_.Apply(raw)));
    const int n = static_cast<int>(raw.size());
    if (fitted_n_ > 0 && n >= kAlwaysRefitBelow && n < kRefitGrowth * fitted_n_)
      return Status::Ok();
    GaussianProcess::FitOptions fo;
    fo.restarts = fitted_n_ == 0 || n < 20 ? 2 : 0;
    fitted_n_ = n;
    return gp_.Fit(fo, rng);
  }
  double Standardise(double v) const { return transform_.Apply(v); }
  const GaussianProcess& gp() const { return gp_; }

 private:
  GaussianProcess gp_;
  OutputTransform transform_;
  int fitted_n_ = 0;
};

// Predictions of one model at one point, with their gradients.
struct Prediction {
  double mean = 0, sd = 1;
  Eigen::VectorXd dmean, dsd;
};

Prediction PredictAt(const GaussianProcess& gp, const Eigen::VectorXd& x, bool gradient) {
  Prediction p;
  double var = 0;
  if (gradient) {
    Eigen::VectorXd dvar;
    gp.PredictWithGradient(x, &p.mean, &var, &p.dmean, &dvar);
    p.sd = std::sqrt(std::max(var, kMinSd * kMinSd));
    p.dsd = dvar / (2.0 * p.sd);
  } else {
    Eigen::VectorXd m, v;
    gp.Predict(x.transpose(), &m, &v);
    p.mean = m(0);
    p.sd = std::sqrt(std::max(v(0), kMinSd * kMinSd));
  }
  return p;
}

// log P(z <= threshold) for z ~ N(mean, sd^2), with its gradient through the prediction.
double LogProbBelow(const Prediction& p, double threshold, Eigen::VectorXd* grad) {
  const double t = (threshold - p.mean) / p.sd;
  const double log_p = LogNormalCdf(t);
  if (grad) {
    const double dlogp_dt = std::exp(-0.5 * t * t - 0.91893853320467274178 - log_p);
    *grad += dlogp_dt * (-p.dmean / p.sd - t / p.sd * p.dsd);
  }
  return log_p;
}

class MultiObjectiveGpTuner : public Tuner {
 public:
  MultiObjectiveGpTuner(const SearchSpace& space, const TunerOptions& options)
      : encoder_(space),
        options_(options),
        objectives_(std::max<int>(1, static_cast<int>(options.objectives.size()))),
        initial_(options.initial_trials > 0 ? options.initial_trials
                                            : std::max<int>(5, encoder_.dims() + 1)),
        sobol_(space, options.seed) {
    for (int d = 0; d < encoder_.dims(); ++d)
      continuous_.push_back(space.params()[encoder_.param_of_dim(d)].type == ParamType::kFloat);
  }

  std::string name() const override { return "gp"; }

  void Observe(const TrialOutcome& outcome) override {
    sobol_.Observe(outcome);
    Trial t;
    t.config = outcome.config;
    t.x = ToEigen(encoder_.Encode(outcome.config).x);
    t.completed = outcome.kind == TrialOutcome::Kind::kCompleted;
    t.infeasible = outcome.kind == TrialOutcome::Kind::kInfeasible;
    std::vector<double> values = objectives_ > 1 || !options_.objectives.empty()
                                     ? outcome.values
                                     : std::vector<double>{outcome.value.value_or(std::nan(""))};
    const bool all =
        static_cast<int>(values.size()) == objectives_ &&
        std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
    if (all && (t.completed || outcome.kind == TrialOutcome::Kind::kPruned)) {
      for (int k = 0; k < objectives_; ++k)
        if (Maximised(k)) values[k] = -values[k];
      (t.completed ? t.values : t.stopped) = std::move(values);
    }
    for (int j = 0; j < options_.constraints; ++j) {
      const double v =
          j < static_cast<int>(outcome.violations.size()) ? outcome.violations[j] : std::nan("");
      t.violations.push_back(std::isnan(v) ? std::numeric_limits<double>::infinity() : v);
    }
    trials_.push_back(std::move(t));
  }

  Result<std::vector<Config>> Propose(int n, std::span<const Config> pending) override {
    std::vector<Config> out;
    if (n <= 0) return out;
    const int seen = static_cast<int>(trials_.size() + pending.size());
    const int modelled = static_cast<int>(Modelled().size());
    const int from_sobol = modelled < 2 ? n : std::clamp(initial_ - seen, 0, n);
    if (from_sobol > 0) {
      HP_ASSIGN_OR_RETURN(out, sobol_.Propose(from_sobol, pending));
      if (static_cast<int>(out.size()) == n || from_sobol == n) return out;
    }
    std::vector<Config> all_pending(pending.begin(), pending.end());
    all_pending.insert(all_pending.end(), out.begin(), out.end());
    rng_.seed(Mix64(options_.seed ^ Mix64(0x30e + static_cast<uint64_t>(seen))));
    HP_RETURN_IF_ERROR(UpdateModels());
    HP_ASSIGN_OR_RETURN(std::vector<Config> more,
                        ProposeFromModels(n - static_cast<int>(out.size()), all_pending, seen));
    for (Config& c : more) out.push_back(std::move(c));
    return out;
  }

 private:
  bool Maximised(int k) const {
    return k < static_cast<int>(options_.objectives.size()) ? options_.objectives[k]
                                                            : options_.maximize;
  }
  bool ParEgo() const { return objectives_ > 2; }

  // Completed trials with every objective's value: what the models learn from.
  std::vector<int> Modelled() const {
    std::vector<int> idx;
    for (int i = 0; i < static_cast<int>(trials_.size()); ++i)
      if (!trials_[i].values.empty()) idx.push_back(i);
    return idx;
  }

  // What the objectives' models learn: each completed trial's values, and each pruned trial's
  // as no better, objective by objective, than the completed trials' median nor than its own last
  // report (as the one-objective tuner counts a trial stopped below its level; TPE ranks pruned
  // trials below completed ones), so that a region pruners keep stopping is not proposed again.
  std::vector<std::pair<int, std::vector<double>>> Learnt(const std::vector<int>& done) const {
    std::vector<std::pair<int, std::vector<double>>> out;
    for (int i : done) out.emplace_back(i, trials_[i].values);
    if (done.size() < 2) return out;
    std::vector<double> median(objectives_);
    for (int k = 0; k < objectives_; ++k) {
      std::vector<double> v;
      for (int i : done) v.push_back(trials_[i].values[k]);
      median[k] = MedianOf(std::move(v));
    }
    for (int i = 0; i < static_cast<int>(trials_.size()); ++i) {
      if (trials_[i].stopped.empty()) continue;
      std::vector<double> y = trials_[i].stopped;
      for (int k = 0; k < objectives_; ++k) y[k] = std::max(y[k], median[k]);
      out.emplace_back(i, std::move(y));
    }
    return out;
  }

  Status UpdateModels() {
    const std::vector<int> idx = Modelled();
    const auto learnt = Learnt(idx);
    const int n = static_cast<int>(learnt.size()), d = encoder_.dims();
    Eigen::MatrixXd x(n, d);
    for (int i = 0; i < n; ++i) x.row(i) = trials_[learnt[i].first].x.transpose();
    if (ParEgo()) {
      HP_RETURN_IF_ERROR(UpdateScalarised(learnt, x));
    } else {
      models_.resize(objectives_, Model(d));
      for (int k = 0; k < objectives_; ++k) {
        Eigen::VectorXd y(n);
        for (int i = 0; i < n; ++i) y(i) = learnt[i].second[k];
        HP_RETURN_IF_ERROR(models_[k].Update(x, y, rng_));
      }
    }
    // The constraints' models and the front: the completed trials only.
    const int m = static_cast<int>(idx.size());
    Eigen::MatrixXd xc(m, d);
    for (int i = 0; i < m; ++i) xc.row(i) = trials_[idx[i]].x.transpose();
    constraint_models_.resize(options_.constraints, Model(d));
    for (int j = 0; j < options_.constraints; ++j) {
      // A constraint never reported counts as broken by more than any reported break.
      double worst = 0;
      for (int i : idx)
        if (std::isfinite(trials_[i].violations[j]))
          worst = std::max(worst, trials_[i].violations[j]);
      Eigen::VectorXd y(m);
      for (int i = 0; i < m; ++i) {
        const double v = trials_[idx[i]].violations[j];
        y(i) = std::isfinite(v) ? v : 2 * worst + 1;
      }
      HP_RETURN_IF_ERROR(constraint_models_[j].Update(xc, y, rng_));
    }
    HP_RETURN_IF_ERROR(UpdateFeasibility(idx));
    front_.clear();
    for (int i : idx)
      if (trials_[i].Feasible()) front_.push_back(Standardised(trials_[i].values));
    SetReference(idx);
    return Status::Ok();
  }

  // Where configurations can run (feasibility.h): the modelled trials and the infeasible ones,
  // once one was.
  Status UpdateFeasibility(const std::vector<int>& modelled) {
    std::vector<int> idx = modelled;
    for (int i = 0; i < static_cast<int>(trials_.size()); ++i)
      if (trials_[i].infeasible) idx.push_back(i);
    if (idx.size() == modelled.size()) {
      feasibility_.Clear();
      return Status::Ok();
    }
    Eigen::MatrixXd x(idx.size(), encoder_.dims());
    std::vector<bool> ran;
    for (size_t i = 0; i < idx.size(); ++i) {
      x.row(static_cast<Eigen::Index>(i)) = trials_[idx[i]].x.transpose();
      ran.push_back(!trials_[idx[i]].infeasible);
    }
    return feasibility_.Update(x, ran);
  }

  // ParEGO: this call's weights, and one model of the scalarised objectives.
  Status UpdateScalarised(const std::vector<std::pair<int, std::vector<double>>>& learnt,
                          const Eigen::MatrixXd& x) {
    std::vector<double> lo(objectives_, std::numeric_limits<double>::infinity());
    std::vector<double> hi(objectives_, -std::numeric_limits<double>::infinity());
    for (const auto& [i, values] : learnt)
      for (int k = 0; k < objectives_; ++k) {
        lo[k] = std::min(lo[k], values[k]);
        hi[k] = std::max(hi[k], values[k]);
      }
    // Weights uniform on the simplex: normalised exponential draws.
    std::exponential_distribution<double> draw(1.0);
    weights_.assign(objectives_, 0.0);
    double sum = 0;
    for (double& w : weights_) sum += (w = draw(rng_));
    for (double& w : weights_) w /= sum;
    scalar_lo_ = lo;
    scalar_range_.resize(objectives_);
    for (int k = 0; k < objectives_; ++k) scalar_range_[k] = std::max(hi[k] - lo[k], 1e-12);
    Eigen::VectorXd y(static_cast<Eigen::Index>(learnt.size()));
    for (size_t i = 0; i < learnt.size(); ++i) y(i) = Scalarise(learnt[i].second);
    if (!scalar_model_) scalar_model_ = std::make_unique<Model>(encoder_.dims());
    return scalar_model_->Update(x, y, rng_);
  }

  double Scalarise(const std::vector<double>& values) const {
    double worst = -std::numeric_limits<double>::infinity(), sum = 0;
    for (int k = 0; k < objectives_; ++k) {
      const double f = weights_[k] * (values[k] - scalar_lo_[k]) / scalar_range_[k];
      worst = std::max(worst, f);
      sum += f;
    }
    return worst + kParEgoRho * sum;
  }

  // A trial's values in the models' units: each objective standardised, or (ParEGO) the one
  // scalarised value standardised.
  std::vector<double> Standardised(const std::vector<double>& values) const {
    if (ParEgo()) return {scalar_model_->Standardise(Scalarise(values))};
    std::vector<double> out(objectives_);
    for (int k = 0; k < objectives_; ++k) out[k] = models_[k].Standardise(values[k]);
    return out;
  }

  void SetReference(const std::vector<int>& idx) {
    const int m = ParEgo() ? 1 : objectives_;
    std::vector<double> lo(m, std::numeric_limits<double>::infinity()), hi(m, -lo[0]);
    for (int i : idx) {
      const std::vector<double> y = Standardised(trials_[i].values);
      for (int k = 0; k < m; ++k) {
        lo[k] = std::min(lo[k], y[k]);
        hi[k] = std::max(hi[k], y[k]);
      }
    }
    reference_.resize(m);
    for (int k = 0; k < m; ++k) reference_[k] = hi[k] + kReferenceMargin * (hi[k] - lo[k]) + 1e-9;
  }

  // The models a proposal reads, with the fantasies of its batch in them.
  struct Models {
    std::vector<GaussianProcess> objectives;  // one, the scalarised, for ParEGO
    std::vector<GaussianProcess> constraints;
    std::vector<double> thresholds;  // each constraint's 0 in its model's units
    std::vector<ObjectiveVector> front;
    BoxDecomposition boxes;  // two objectives: what the front leaves below ref
    double best = std::numeric_limits<double>::infinity();  // one objective: the incumbent
  };

  Models Snapshot() const {
    Models m;
    if (ParEgo()) {
      m.objectives.push_back(scalar_model_->gp());
    } else {
      for (const Model& model : models_) m.objectives.push_back(model.gp());
    }
    for (const Model& c : constraint_models_) {
      m.constraints.push_back(c.gp());
      m.thresholds.push_back(c.Standardise(0.0));
    }
    m.front = front_;
    for (const ObjectiveVector& y : front_) m.best = std::min(m.best, y[0]);
    if (m.objectives.size() > 1) m.boxes = NonDominatedBoxes(m.front, reference_);
    return m;
  }

  // The acquisition at x, larger is better, with its gradient when asked.
  double Acquisition(const Models& m, const Eigen::VectorXd& x, Eigen::VectorXd* grad) const {
    if (grad) *grad = Eigen::VectorXd::Zero(x.size());
    double value = 0;
    const bool any_feasible = !m.front.empty();
    if (any_feasible || m.constraints.empty()) {
      std::vector<Prediction> p;
      for (const GaussianProcess& gp : m.objectives) p.push_back(PredictAt(gp, x, grad));
      if (p.size() > 1) {
        std::vector<double> mean, sd;
        for (const Prediction& q : p) {
          mean.push_back(q.mean);
          sd.push_back(q.sd);
        }
        const MultiObjectiveAcquisition a = LogExpectedHypervolumeImprovement(mean, sd, m.boxes);
        value = a.value;
        if (grad)
          for (size_t k = 0; k < p.size(); ++k)
            *grad += a.dmean[k] * p[k].dmean + a.dsigma[k] * p[k].dsd;
      } else {
        const double best = std::isfinite(m.best) ? m.best : reference_[0];
        const AcquisitionValue a = LogExpectedImprovement(p[0].mean, p[0].sd, best);
        value = a.value;
        if (grad) *grad += a.dmean * p[0].dmean + a.dsigma * p[0].dsd;
      }
    }
    for (size_t j = 0; j < m.constraints.size(); ++j)
      value += LogProbBelow(PredictAt(m.constraints[j], x, grad), m.thresholds[j], grad);
    if (feasibility_.active()) value += feasibility_.LogProbability(x, grad);
    return value;
  }

  // The acquisition at the rows of xs, each model predicting them all at once (as Acquisition
  // at each, without gradients).
  Eigen::VectorXd AcquisitionBatch(const Models& m, const Eigen::MatrixXd& xs) const {
    const Eigen::Index n = xs.rows();
    Eigen::VectorXd out = Eigen::VectorXd::Zero(n);
    auto predict = [&](const GaussianProcess& gp, Eigen::VectorXd* mean, Eigen::VectorXd* sd) {
      Eigen::VectorXd var;
      gp.Predict(xs, mean, &var);
      *sd = var.cwiseMax(kMinSd * kMinSd).cwiseSqrt();
    };
    if (!m.front.empty() || m.constraints.empty()) {
      const size_t k = m.objectives.size();
      std::vector<Eigen::VectorXd> mean(k), sd(k);
      for (size_t j = 0; j < k; ++j) predict(m.objectives[j], &mean[j], &sd[j]);
      const double best = std::isfinite(m.best) ? m.best : reference_[0];
      std::vector<double> mu(k), sigma(k);
      for (Eigen::Index i = 0; i < n; ++i) {
        for (size_t j = 0; j < k; ++j) {
          mu[j] = mean[j](i);
          sigma[j] = sd[j](i);
        }
        out(i) = k > 1 ? LogExpectedHypervolumeImprovement(mu, sigma, m.boxes).value
                       : LogExpectedImprovement(mu[0], sigma[0], best).value;
      }
    }
    for (size_t j = 0; j < m.constraints.size(); ++j) {
      Eigen::VectorXd mean, sd;
      predict(m.constraints[j], &mean, &sd);
      for (Eigen::Index i = 0; i < n; ++i)
        out(i) += LogNormalCdf((m.thresholds[j] - mean(i)) / sd(i));
    }
    if (feasibility_.active()) out += feasibility_.LogProbabilities(xs);
    return out;
  }

  // Where to look besides the whole space: around up to kLocalCentres front members (the best
  // trials for one objective), chosen at random.
  std::vector<Config> Centres() const {
    std::vector<Config> centres;
    std::vector<int> members;
    const std::vector<int> idx = Modelled();
    std::vector<ObjectiveVector> feasible;
    std::vector<int> which;
    for (int i : idx)
      if (trials_[i].Feasible()) {
        feasible.push_back(trials_[i].values);
        which.push_back(i);
      }
    if (feasible.empty()) return centres;
    if (ParEgo() || objectives_ == 1) {
      std::vector<int> order(feasible.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) {
        return ParEgo() ? Scalarise(feasible[a]) < Scalarise(feasible[b])
                        : feasible[a][0] < feasible[b][0];
      });
      for (int o : order) members.push_back(which[o]);
    } else {
      const std::vector<std::vector<int>> fronts = NonDominatedSort(feasible);
      for (int f : fronts.front()) members.push_back(which[f]);
      std::mt19937_64 rng(Mix64(options_.seed ^ 0xce7 ^ trials_.size()));
      std::shuffle(members.begin(), members.end(), rng);
    }
    if (members.size() > kLocalCentres) members.resize(kLocalCentres);
    for (int i : members) centres.push_back(trials_[i].config);
    return centres;
  }

  std::vector<ScoredPoint> Ranked(const Models& m, uint64_t salt) const {
    std::mt19937_64 rng(Mix64(options_.seed ^ Mix64(0x3c0 + salt)));
    std::vector<Eigen::VectorXd> cands = GlobalCandidates(encoder_, Mix64(options_.seed ^ salt));
    AddLocalCandidates(encoder_, Centres(), rng, &cands);
    Eigen::MatrixXd xs(cands.size(), encoder_.dims());
    for (size_t j = 0; j < cands.size(); ++j) xs.row(static_cast<Eigen::Index>(j)) = cands[j];
    const Eigen::VectorXd acq_all = AcquisitionBatch(m, xs);
    std::vector<ScoredPoint> scored;
    for (size_t j = 0; j < cands.size(); ++j)
      scored.push_back({acq_all(static_cast<Eigen::Index>(j)), cands[j]});
    std::sort(scored.begin(), scored.end(),
              [](const ScoredPoint& a, const ScoredPoint& b) { return a.acq > b.acq; });
    auto acq = [&](const Eigen::VectorXd& x, Eigen::VectorXd* g) { return Acquisition(m, x, g); };
    std::vector<ScoredPoint> refined;
    for (size_t j = 0; j < scored.size() && static_cast<int>(refined.size()) < kRefineStarts; ++j) {
      bool distinct = true;
      for (const ScoredPoint& r : refined) distinct = distinct && (r.x - scored[j].x).norm() > 1e-6;
      if (distinct) refined.push_back(RefineContinuous(encoder_, continuous_, scored[j], acq));
    }
    refined.insert(refined.end(), scored.begin(), scored.end());
    std::stable_sort(refined.begin(), refined.end(),
                     [](const ScoredPoint& a, const ScoredPoint& b) { return a.acq > b.acq; });
    return refined;
  }

  // A fantasy at x: every model's posterior mean appended as data, and its point on the front.
  Status Fantasise(Models& m, const Eigen::VectorXd& x) const {
    ObjectiveVector y;
    for (GaussianProcess& gp : m.objectives) {
      const double mean = PredictAt(gp, x, false).mean;
      HP_RETURN_IF_ERROR(gp.Append(x, mean));
      y.push_back(mean);
    }
    bool feasible = true;
    for (size_t j = 0; j < m.constraints.size(); ++j) {
      const double mean = PredictAt(m.constraints[j], x, false).mean;
      HP_RETURN_IF_ERROR(m.constraints[j].Append(x, mean));
      feasible = feasible && mean <= m.thresholds[j];
    }
    if (feasible) {
      m.best = std::min(m.best, y[0]);
      m.front.push_back(std::move(y));
      if (m.objectives.size() > 1) m.boxes = NonDominatedBoxes(m.front, reference_);
    }
    return Status::Ok();
  }

  bool Taken(const Config& c, const Eigen::VectorXd& x, const std::vector<Config>& pending,
             const std::vector<Eigen::VectorXd>& pending_x) const {
    for (const Trial& t : trials_)
      if (SameConfig(t.config, c)) return true;
    return NearPending(c, x, pending, pending_x);
  }

  Result<std::vector<Config>> ProposeFromModels(int n, std::vector<Config> pending, int seen) {
    Models m = Snapshot();
    std::vector<Eigen::VectorXd> pending_x;
    for (const Config& c : pending) {
      pending_x.push_back(ToEigen(encoder_.Encode(c).x));
      HP_RETURN_IF_ERROR(Fantasise(m, pending_x.back()));
    }
    std::vector<Config> out;
    for (int i = 0; i < n; ++i) {
      std::optional<Chosen> chosen = FirstUntaken(
          encoder_, Ranked(m, static_cast<uint64_t>(seen + i)),
          [&](const Config& c, const Eigen::VectorXd& x) {
            return Taken(c, x, pending, pending_x);
          },
          sobol_, pending);
      if (!chosen) break;
      HP_RETURN_IF_ERROR(Fantasise(m, chosen->x));
      pending.push_back(chosen->config);
      pending_x.push_back(chosen->x);
      out.push_back(std::move(chosen->config));
    }
    return out;
  }

  Encoder encoder_;
  TunerOptions options_;
  int objectives_;
  int initial_;
  SobolSampler sobol_;
  std::vector<bool> continuous_;
  std::vector<Trial> trials_;
  std::vector<Model> models_;  // one per objective (not for ParEGO)
  std::vector<Model> constraint_models_;
  FeasibilityModel feasibility_;
  std::unique_ptr<Model> scalar_model_;  // ParEGO
  std::vector<double> weights_, scalar_lo_, scalar_range_;
  std::vector<ObjectiveVector> front_;  // the feasible trials' values in the models' units
  std::vector<double> reference_;
  std::mt19937_64 rng_;
};

}  // namespace multi_objective

std::unique_ptr<Tuner> MakeMultiObjectiveGpTuner(const SearchSpace& space,
                                                 const TunerOptions& options) {
  return std::make_unique<multi_objective::MultiObjectiveGpTuner>(space, options);
}

}  // namespace hyperpack::tuner
