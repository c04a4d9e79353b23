// The transform from raw objective values (to be minimised) to the GP's targets: standardise,
// then a Yeo-Johnson power transform whose exponent is fitted by maximum likelihood, then
// standardise again. Rank-preserving; it pulls in the heavy tails that learning-rate sweeps
// produce (a diverged run's loss is orders of magnitude above a good one) and is close to the
// identity for well-behaved values.
// Thread-safety: a value; const methods are safe from several threads.
#pragma once

#include <Eigen/Dense>
#include <vector>

namespace hyperpack::tuner {

class OutputTransform {
 public:
  // Fits to `y` (at least one value). With warp false only standardises.
  void Fit(const Eigen::VectorXd& y, bool warp);
  double Apply(double y) const;
  Eigen::VectorXd Apply(const Eigen::VectorXd& y) const;
  double lambda() const { return lambda_; }

  // The Yeo-Johnson transform and its log-likelihood for exponent `lambda`, for tests.
  static double YeoJohnson(double y, double lambda);
  static double LogLikelihood(const Eigen::VectorXd& z, double lambda);

 private:
  double mean1_ = 0, scale1_ = 1;  // first standardisation
  double lambda_ = 1;              // 1: no warping
  double mean2_ = 0, scale2_ = 1;  // second standardisation
};

// Objectives flat in pieces (gp_tuner.cc). Whether the best of the values (sorted ascending) is
// shared by another and some value is worse: the incumbent sits on a plateau. Values that all tie
// say nothing of the kind: a start where every configuration scores the same (a forest that
// predicts nothing) is a region with no signal yet, not a plateau at the top.
bool IncumbentShared(const std::vector<double>& sorted);
// The improvement that expected improvement must clear: 0, or where the incumbent is shared, the
// smallest gap between distinct values (one step of the objective's apparent resolution).
double PlateauMargin(const std::vector<double>& sorted);

}  // namespace hyperpack::tuner
