// The cost model (cost_model.h): the tuner's GP on standardised log costs.
#include "hyperpack/tuner/cost_model.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <random>

#include "gp.h"
#include "hyperpack/tuner/encoding.h"

namespace hyperpack::tuner {

double CostPrediction::Low() const { return median * std::exp(-log_sd); }
double CostPrediction::High() const { return median * std::exp(log_sd); }

struct CostModel::Impl {
  Impl(const SearchSpace& space, int dims) : encoder(space), gp(dims, GpPrior::ForDims(dims)) {}
  Encoder encoder;
  GaussianProcess gp;
  // The log costs were standardised by these before the fit (the GP's priors expect it).
  double log_mean = 0, log_scale = 1;
};

Result<CostModel> CostModel::Fit(const SearchSpace& space, std::span<const Config> configs,
                                 std::span<const double> costs, const CostModelOptions& options) {
  if (configs.size() != costs.size())
    return Status::Invalid(configs.size(), " configurations but ", costs.size(), " costs");
  const int n = static_cast<int>(costs.size());
  if (n < options.min_trials)
    return Status::FailedPrecondition("needs the costs of ", options.min_trials, " trials, has ",
                                      n);
  auto impl = std::make_unique<Impl>(space, Encoder(space).dims());
  const int d = impl->encoder.dims();
  if (d == 0) return Status::FailedPrecondition("the search space has no tuned parameter");
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(costs[i]) || costs[i] <= 0)
      return Status::Invalid("cost ", i, " is ", costs[i], "; a cost is finite and positive");
    const Encoder::Encoded e = impl->encoder.Encode(configs[i]);
    x.row(i) = Eigen::Map<const Eigen::VectorXd>(e.x.data(), d).transpose();
    y(i) = std::log(costs[i]);
  }
  impl->log_mean = y.mean();
  const double sd = std::sqrt((y.array() - impl->log_mean).square().sum() / n);
  // Costs that are all alike still predict: their own level, a small spread.
  impl->log_scale = sd > 1e-6 ? sd : 1.0;
  HP_RETURN_IF_ERROR(impl->gp.SetData(x, (y.array() - impl->log_mean).matrix() / impl->log_scale));
  std::mt19937_64 rng(options.seed);
  GaussianProcess::FitOptions fit;
  fit.restarts = 2;
  fit.max_iterations = 80;
  HP_RETURN_IF_ERROR(impl->gp.Fit(fit, rng));
  return CostModel(std::move(impl));
}

CostModel::CostModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;
CostModel::~CostModel() = default;

CostPrediction CostModel::Predict(const Config& config) const { return PredictMany({config})[0]; }

std::vector<CostPrediction> CostModel::PredictMany(const std::vector<Config>& configs) const {
  // Rows per solve: the cross-covariance is fitted points x block, at most ~6 MB at 200 points.
  constexpr size_t kBlock = 4096;
  const int d = impl_->encoder.dims();
  // The spread of a run's cost, not only the model's: the noise the fit found is added back.
  const double noise = std::exp(impl_->gp.hyper().log_noise_var);
  std::vector<CostPrediction> out;
  out.reserve(configs.size());
  for (size_t start = 0; start < configs.size(); start += kBlock) {
    const size_t rows = std::min(kBlock, configs.size() - start);
    Eigen::MatrixXd x(static_cast<Eigen::Index>(rows), d);
    for (size_t i = 0; i < rows; ++i) {
      const Encoder::Encoded e = impl_->encoder.Encode(configs[start + i]);
      x.row(static_cast<Eigen::Index>(i)) = Eigen::Map<const Eigen::VectorXd>(e.x.data(), d);
    }
    Eigen::VectorXd mean, var;
    impl_->gp.Predict(x, &mean, &var);
    for (Eigen::Index i = 0; i < mean.size(); ++i) {
      CostPrediction p;
      p.median = std::exp(impl_->log_mean + impl_->log_scale * mean(i));
      p.log_sd = impl_->log_scale * std::sqrt(std::max(0.0, var(i)) + noise);
      out.push_back(p);
    }
  }
  return out;
}

std::vector<CostPrediction> CostModel::LeaveOneOut() const {
  Eigen::VectorXd mean, var;
  impl_->gp.LeaveOneOut(&mean, &var);  // the noisy targets' variance: noise included
  std::vector<CostPrediction> out(mean.size());
  for (Eigen::Index i = 0; i < mean.size(); ++i) {
    out[i].median = std::exp(impl_->log_mean + impl_->log_scale * mean(i));
    out[i].log_sd = impl_->log_scale * std::sqrt(std::max(0.0, var(i)));
  }
  return out;
}

}  // namespace hyperpack::tuner
