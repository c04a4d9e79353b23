#include "hyperpack/tuner/importance.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <random>

#include "gp.h"
#include "hyperpack/tuner/encoding.h"
#include "output_transform.h"

namespace hyperpack::tuner {

Result<std::vector<ParamImportance>> ParameterImportance(const SearchSpace& space,
                                                         std::span<const Config> configs,
                                                         std::span<const double> values,
                                                         const ImportanceOptions& options) {
  if (configs.size() != values.size())
    return Status::Invalid(configs.size(), " configurations but ", values.size(), " values");
  const Encoder encoder(space);
  const int d = encoder.dims();
  const int n = static_cast<int>(values.size());
  if (d == 0) return Status::FailedPrecondition("the search space has no tuned parameter");
  if (n < options.min_trials)
    return Status::FailedPrecondition("needs ", options.min_trials, " scored trials, has ", n);
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd raw(n);
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return Status::Invalid("value ", i, " is not finite");
    const Encoder::Encoded e = encoder.Encode(configs[i]);
    x.row(i) = Eigen::Map<const Eigen::VectorXd>(e.x.data(), d).transpose();
    raw(i) = values[i];
  }
  if (raw.maxCoeff() == raw.minCoeff())
    return Status::FailedPrecondition("every trial scored the same");
  // As the tuner models them: standardised and warped, so that one diverged run's huge loss does
  // not make every parameter look like noise.
  OutputTransform transform;
  transform.Fit(raw, /*warp=*/true);
  GaussianProcess gp(d, GpPrior::ForDims(d));
  HP_RETURN_IF_ERROR(gp.SetData(x, transform.Apply(raw)));
  std::mt19937_64 rng(options.seed);
  GaussianProcess::FitOptions fit;
  fit.restarts = 4;
  fit.max_iterations = 100;
  HP_RETURN_IF_ERROR(gp.Fit(fit, rng));

  std::vector<ParamImportance> out;
  double total = 0;
  for (int p = 0; p < static_cast<int>(space.params().size()); ++p) {
    if (encoder.num_dims(p) == 0) continue;
    const int first = encoder.first_dim(p);
    const double shortest =
        gp.hyper().log_lengthscale.segment(first, encoder.num_dims(p)).minCoeff();
    out.push_back({space.params()[p].name, std::exp(-shortest)});
    total += out.back().importance;
  }
  for (ParamImportance& i : out) i.importance /= total;
  std::stable_sort(out.begin(), out.end(), [](const ParamImportance& a, const ParamImportance& b) {
    return a.importance > b.importance;
  });
  return out;
}

}  // namespace hyperpack::tuner
