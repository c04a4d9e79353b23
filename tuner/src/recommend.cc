#include "hyperpack/tuner/recommend.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <random>

#include "gp.h"
#include "hyperpack/tuner/encoding.h"
#include "output_transform.h"

namespace hyperpack::tuner {

namespace {

// The distinct configurations' best runs, best value first (ties: the earlier run), the first
// `top_k` of them (all for 0).
std::vector<size_t> Candidates(std::span<const Config> configs, std::span<const double> values,
                               int top_k) {
  std::vector<size_t> best;  // one run per distinct configuration
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    auto same =
        std::find_if(best.begin(), best.end(), [&](size_t j) { return configs[j] == configs[i]; });
    if (same == best.end())
      best.push_back(i);
    else if (values[i] < values[*same])
      *same = i;
  }
  std::stable_sort(best.begin(), best.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  if (top_k > 0 && static_cast<int>(best.size()) > top_k) best.resize(top_k);
  return best;
}

// The rows of configs[which[r]], encoded as the tuner encodes them.
Eigen::MatrixXd Encode(const Encoder& encoder, std::span<const Config> configs,
                       const std::vector<size_t>& which) {
  Eigen::MatrixXd x(which.size(), encoder.dims());
  for (size_t r = 0; r < which.size(); ++r) {
    const Encoder::Encoded e = encoder.Encode(configs[which[r]]);
    x.row(r) = Eigen::Map<const Eigen::VectorXd>(e.x.data(), encoder.dims()).transpose();
  }
  return x;
}

// Of `finite`, the `keep` runs nearest a candidate (ties: the better value): a fit is cubic in the
// runs, and a candidate is judged by its neighbourhood, its unlucky neighbours included.
std::vector<size_t> Nearest(const Encoder& encoder, std::span<const Config> configs,
                            std::span<const double> values, std::vector<size_t> finite,
                            const std::vector<size_t>& candidates, int keep) {
  const Eigen::MatrixXd xc = Encode(encoder, configs, candidates);
  const Eigen::MatrixXd x = Encode(encoder, configs, finite);
  std::vector<double> distance(values.size(), 0);
  for (size_t r = 0; r < finite.size(); ++r)
    distance[finite[r]] = (xc.rowwise() - x.row(r)).rowwise().squaredNorm().minCoeff();
  std::nth_element(finite.begin(), finite.begin() + keep, finite.end(), [&](size_t a, size_t b) {
    return distance[a] != distance[b] ? distance[a] < distance[b] : values[a] < values[b];
  });
  finite.resize(keep);
  return finite;
}

}  // namespace

Result<Recommendation> RecommendByModel(const SearchSpace& space, std::span<const Config> configs,
                                        std::span<const double> values,
                                        const RecommendOptions& options) {
  if (configs.size() != values.size())
    return Status::Invalid(configs.size(), " configurations but ", values.size(), " values");
  const Encoder encoder(space);
  const int d = encoder.dims();
  if (d == 0) return Status::FailedPrecondition("the search space has no tuned parameter");
  std::vector<size_t> finite;
  for (size_t i = 0; i < values.size(); ++i)
    if (std::isfinite(values[i])) finite.push_back(i);
  if (static_cast<int>(finite.size()) < options.min_runs)
    return Status::FailedPrecondition("needs ", options.min_runs, " runs with a finite value, has ",
                                      finite.size());
  const std::vector<size_t> candidates = Candidates(configs, values, options.top_k);
  if (static_cast<int>(finite.size()) > options.max_runs)
    finite = Nearest(encoder, configs, values, finite, candidates, options.max_runs);
  const int n = static_cast<int>(finite.size());
  const Eigen::MatrixXd x = Encode(encoder, configs, finite);
  Eigen::VectorXd raw(n);
  for (int r = 0; r < n; ++r) raw(r) = values[finite[r]];
  if (raw.maxCoeff() == raw.minCoeff())
    return Status::FailedPrecondition("every run scored the same");
  // As the tuner models them: a diverged run's huge error is pulled in, so that the spread among
  // the good runs, where the choice is made, is not read as noise beside it.
  OutputTransform transform;
  transform.Fit(raw, /*warp=*/true);
  GpPrior prior = GpPrior::ForDims(d);
  prior.log_noise_mu = options.log_noise_mu;
  prior.log_noise_sigma = options.log_noise_sigma;
  // A smooth model: a length scale as short as the tuner allows explains a configuration whose
  // trainings sometimes diverge by a sharp dip at the runs that did not, and recommends it.
  prior.min_log_lengthscale =
      std::max(prior.min_log_lengthscale, std::log(options.min_lengthscale));
  prior.log_lengthscale_mu = std::max(prior.log_lengthscale_mu, prior.min_log_lengthscale + 0.5);
  GaussianProcess gp(d, prior);
  GpHyper start = prior.Mode(d);
  HP_RETURN_IF_ERROR(gp.SetDataAndHyper(x, transform.Apply(raw), start));
  std::mt19937_64 rng(options.seed);
  // From the prior's mode (the start, so not again) and two draws: four draws and the mode twice
  // chose the same configuration in 795 of 800 runs on the learning-curve tables, judged level,
  // at twice the time (1.6 s against 0.8 s at 300 runs; docs/BENCHMARKS.md, stop 99).
  GaussianProcess::FitOptions fit;
  fit.restarts = 2;
  fit.from_mode = false;
  fit.max_iterations = 100;
  HP_RETURN_IF_ERROR(gp.Fit(fit, rng));

  Eigen::VectorXd mean, var;
  gp.Predict(Encode(encoder, configs, candidates), &mean, &var);
  Eigen::Index best = 0;
  mean.minCoeff(&best);  // the first of equal means: the better single value
  Recommendation out;
  out.index = candidates[best];
  out.differs = best != 0;
  const double signal = std::exp(gp.hyper().log_signal_var);
  const double noise = std::exp(gp.hyper().log_noise_var);
  out.noise_share = noise / (signal + noise);
  return out;
}

}  // namespace hyperpack::tuner
