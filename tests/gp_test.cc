// The Gaussian process, its acquisition functions and the GP tuner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>
#include <sstream>

#include "acquisition.h"
#include "gp.h"
#include "hyperpack/tuner/encoding.h"
#include "hyperpack/tuner/pareto.h"
#include "hyperpack/tuner/tuner.h"
#include "output_transform.h"
#include "tuner_drive.h"

namespace hyperpack::tuner {
namespace {

Eigen::MatrixXd RandomPoints(int n, int d, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Eigen::MatrixXd x(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) x(i, j) = u(rng);
  return x;
}

Eigen::VectorXd Smooth(const Eigen::MatrixXd& x) {
  Eigen::VectorXd y(x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    y(i) = std::sin(3 * x(i, 0)) + (x.cols() > 1 ? x(i, 1) * x(i, 1) : 0.0) - 0.5;
  return y;
}

GpHyper SomeHyper(int d) {
  GpHyper h;
  h.log_lengthscale = Eigen::VectorXd::LinSpaced(d, std::log(0.3), std::log(1.5));
  h.log_signal_var = std::log(1.3);
  h.log_noise_var = std::log(1e-3);
  h.mean = 0.2;
  return h;
}

// Checks NegLogPosterior's gradient against central differences at three points around
// `base`, each coordinate of theta moved by N(0, 0.3).
void ExpectPosteriorGradientMatches(const GpPrior& prior, const GpHyper& base, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int d = static_cast<int>(base.log_lengthscale.size());
  GaussianProcess gp(d, prior);
  Eigen::MatrixXd x = RandomPoints(25, d, rng);
  ASSERT_TRUE(gp.SetDataAndHyper(x, Smooth(x), base).ok());
  for (int trial = 0; trial < 3; ++trial) {
    Eigen::VectorXd theta = base.Pack();
    std::normal_distribution<double> n(0.0, 0.3);
    for (Eigen::Index i = 0; i < theta.size(); ++i) theta(i) += n(rng);
    Eigen::VectorXd grad;
    double f = gp.NegLogPosterior(theta, &grad);
    ASSERT_TRUE(std::isfinite(f));
    ASSERT_EQ(grad.size(), theta.size());
    for (Eigen::Index i = 0; i < theta.size(); ++i) {
      const double h = 1e-5;
      Eigen::VectorXd up = theta, down = theta;
      up(i) += h;
      down(i) -= h;
      double fd = (gp.NegLogPosterior(up, nullptr) - gp.NegLogPosterior(down, nullptr)) / (2 * h);
      EXPECT_NEAR(grad(i), fd, 1e-5 * std::max(1.0, std::fabs(fd))) << "theta " << i;
    }
  }
}

// Checks PredictWithGradient against Predict and against central differences of Predict.
void ExpectPredictionGradientsMatch(const GpPrior& prior, const GpHyper& hyper, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int d = static_cast<int>(hyper.log_lengthscale.size());
  GaussianProcess gp(d, prior);
  Eigen::MatrixXd x = RandomPoints(30, d, rng);
  ASSERT_TRUE(gp.SetDataAndHyper(x, Smooth(x), hyper).ok());
  Eigen::MatrixXd at = RandomPoints(5, d, rng);
  for (Eigen::Index k = 0; k < at.rows(); ++k) {
    Eigen::VectorXd p = at.row(k).transpose();
    double mean, var;
    Eigen::VectorXd dmean, dvar;
    gp.PredictWithGradient(p, &mean, &var, &dmean, &dvar);
    // The batched prediction agrees with the single one.
    Eigen::VectorXd m, v;
    gp.Predict(p.transpose(), &m, &v);
    EXPECT_NEAR(m(0), mean, 1e-10);
    EXPECT_NEAR(v(0), var, 1e-10);
    for (int j = 0; j < d; ++j) {
      const double h = 1e-6;
      Eigen::VectorXd up = p, down = p;
      up(j) += h;
      down(j) -= h;
      Eigen::VectorXd mu, vu, md, vd;
      gp.Predict(up.transpose(), &mu, &vu);
      gp.Predict(down.transpose(), &md, &vd);
      EXPECT_NEAR(dmean(j), (mu(0) - md(0)) / (2 * h), 1e-5 * std::max(1.0, std::fabs(dmean(j))));
      EXPECT_NEAR(dvar(j), (vu(0) - vd(0)) / (2 * h), 1e-5 * std::max(1.0, std::fabs(dvar(j))));
    }
  }
}

// A prior warping dimensions 0 and 2 of three, and hyperparameters with a and b away from 1.
GpPrior WarpedPrior(int d) {
  GpPrior prior = GpPrior::ForDims(d);
  prior.warp_dims = {0, 2};
  return prior;
}
GpHyper SomeWarpedHyper(int d) {
  GpHyper h = SomeHyper(d);
  h.log_warp_a = Eigen::Vector2d(std::log(0.4), std::log(2.0));
  h.log_warp_b = Eigen::Vector2d(std::log(1.7), std::log(0.6));
  return h;
}

TEST(GaussianProcessTest, LogMarginalLikelihoodGradientMatchesFiniteDifferences) {
  ExpectPosteriorGradientMatches(GpPrior::ForDims(3), SomeHyper(3), 1);
}

TEST(GaussianProcessTest, WarpedLogMarginalLikelihoodGradientMatchesFiniteDifferences) {
  ExpectPosteriorGradientMatches(WarpedPrior(3), SomeWarpedHyper(3), 11);
}

TEST(GaussianProcessTest, PredictionGradientsMatchFiniteDifferences) {
  ExpectPredictionGradientsMatch(GpPrior::ForDims(4), SomeHyper(4), 2);
}

TEST(GaussianProcessTest, WarpedPredictionGradientsMatchFiniteDifferences) {
  ExpectPredictionGradientsMatch(WarpedPrior(3), SomeWarpedHyper(3), 12);
}

TEST(GaussianProcessTest, WarpingWithUnitParametersIsTheIdentity) {
  // a = b = 1 leaves every coordinate where it was (but for the squeeze, 1e-6): the same
  // predictions as the GP without warping.
  std::mt19937_64 rng(13);
  const int d = 3;
  Eigen::MatrixXd x = RandomPoints(20, d, rng);
  GaussianProcess plain(d, GpPrior::ForDims(d)), warped(d, WarpedPrior(d));
  GpHyper h = SomeHyper(d);
  ASSERT_TRUE(plain.SetDataAndHyper(x, Smooth(x), h).ok());
  h.log_warp_a = h.log_warp_b = Eigen::Vector2d::Zero();
  ASSERT_TRUE(warped.SetDataAndHyper(x, Smooth(x), h).ok());
  Eigen::MatrixXd at = RandomPoints(10, d, rng);
  Eigen::VectorXd m1, v1, m2, v2;
  plain.Predict(at, &m1, &v1);
  warped.Predict(at, &m2, &v2);
  EXPECT_LT((m1 - m2).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_LT((v1 - v2).cwiseAbs().maxCoeff(), 1e-4);
}

TEST(GaussianProcessTest, LearntWarpingStretchesTheEndWhereTheObjectiveMoves) {
  // An objective that varies on a log scale of x0 (a learning rate declared linear): it swings
  // within the first percent of [0, 1] and is almost flat beyond. The fitted warp stretches the
  // low end (a < 1), and predicts held-out points better than the same GP without warping.
  std::mt19937_64 rng(14);
  const int d = 2;
  auto f = [](const Eigen::MatrixXd& x) {
    Eigen::VectorXd y(x.rows());
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      y(i) = std::sin(2.0 * std::log(x(i, 0) + 1e-3)) + 0.3 * x(i, 1);
    return y;
  };
  Eigen::MatrixXd x = RandomPoints(40, d, rng);
  x.col(0) = x.col(0).array().pow(3.0);  // points spread on the log scale, as a tuner's would be
  Eigen::VectorXd y = f(x);
  const double mu = y.mean(), sd = std::sqrt((y.array() - mu).square().mean());
  y = (y.array() - mu) / sd;
  Eigen::MatrixXd held = RandomPoints(200, d, rng);
  held.col(0) = held.col(0).array().pow(3.0);
  Eigen::VectorXd truth = (f(held).array() - mu) / sd;
  auto held_out_error = [&](GpPrior prior, double* log_a) {
    GaussianProcess gp(d, std::move(prior));
    EXPECT_TRUE(gp.SetData(x, y).ok());
    GaussianProcess::FitOptions fo;
    fo.restarts = 3;
    std::mt19937_64 fit_rng(15);
    EXPECT_TRUE(gp.Fit(fo, fit_rng).ok());
    if (log_a) *log_a = gp.hyper().log_warp_a(0);
    Eigen::VectorXd m, v;
    gp.Predict(held, &m, &v);
    return std::sqrt((m - truth).squaredNorm() / truth.size());
  };
  GpPrior warped = GpPrior::ForDims(d);
  warped.warp_dims = {0, 1};
  double log_a = 0;
  const double with = held_out_error(warped, &log_a);
  const double without = held_out_error(GpPrior::ForDims(d), nullptr);
  EXPECT_LT(log_a, std::log(0.7));
  EXPECT_LT(with, 0.8 * without) << "rmse with warping " << with << ", without " << without;
}

TEST(GaussianProcessTest, InterpolatesNoiselessData) {
  std::mt19937_64 rng(3);
  const int d = 2;
  GaussianProcess gp(d, GpPrior::ForDims(d));
  Eigen::MatrixXd x = RandomPoints(20, d, rng);
  Eigen::VectorXd y = Smooth(x);
  GpHyper h = SomeHyper(d);
  h.log_noise_var = std::log(1e-8);
  ASSERT_TRUE(gp.SetDataAndHyper(x, y, h).ok());
  Eigen::VectorXd mean, var;
  gp.Predict(x, &mean, &var);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    EXPECT_NEAR(mean(i), y(i), 1e-4);
    EXPECT_LT(var(i), 1e-4);
  }
  // Away from the data the uncertainty is back near the signal variance.
  Eigen::VectorXd far_mean, far_var;
  gp.Predict(Eigen::RowVectorXd::Constant(d, 40.0), &far_mean, &far_var);
  EXPECT_NEAR(far_var(0), std::exp(h.log_signal_var), 1e-6);
  EXPECT_NEAR(far_mean(0), h.mean, 1e-6);
}

TEST(GaussianProcessTest, AppendingAPointEqualsFactoringEverything) {
  std::mt19937_64 rng(4);
  const int d = 3;
  Eigen::MatrixXd x = RandomPoints(40, d, rng);
  Eigen::VectorXd y = Smooth(x);
  GaussianProcess full(d, GpPrior::ForDims(d)), grown(d, GpPrior::ForDims(d));
  ASSERT_TRUE(full.SetDataAndHyper(x, y, SomeHyper(d)).ok());
  ASSERT_TRUE(grown.SetDataAndHyper(x.topRows(30), y.head(30), SomeHyper(d)).ok());
  for (int i = 30; i < 40; ++i) ASSERT_TRUE(grown.Append(x.row(i).transpose(), y(i)).ok());
  Eigen::MatrixXd at = RandomPoints(10, d, rng);
  Eigen::VectorXd m1, v1, m2, v2;
  full.Predict(at, &m1, &v1);
  grown.Predict(at, &m2, &v2);
  EXPECT_LT((m1 - m2).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_LT((v1 - v2).cwiseAbs().maxCoeff(), 1e-9);
}

TEST(GaussianProcessTest, LeaveOneOutEqualsRefittingWithoutEachPoint) {
  std::mt19937_64 rng(9);
  const int d = 2, n = 25;
  Eigen::MatrixXd x = RandomPoints(n, d, rng);
  Eigen::VectorXd y = Smooth(x);
  GaussianProcess gp(d, GpPrior::ForDims(d));
  ASSERT_TRUE(gp.SetDataAndHyper(x, y, SomeHyper(d)).ok());
  Eigen::VectorXd loo_mean, loo_var;
  gp.LeaveOneOut(&loo_mean, &loo_var);
  ASSERT_EQ(loo_mean.size(), n);
  const double noise = std::exp(SomeHyper(d).log_noise_var);
  for (int i = 0; i < n; ++i) {
    // The same GP factored on the other n - 1 points, predicting point i's noisy target.
    Eigen::MatrixXd xo(n - 1, d);
    Eigen::VectorXd yo(n - 1);
    for (int j = 0, k = 0; j < n; ++j) {
      if (j == i) continue;
      xo.row(k) = x.row(j);
      yo(k++) = y(j);
    }
    GaussianProcess without(d, GpPrior::ForDims(d));
    ASSERT_TRUE(without.SetDataAndHyper(xo, yo, SomeHyper(d)).ok());
    Eigen::VectorXd m, v;
    without.Predict(x.row(i), &m, &v);
    EXPECT_NEAR(loo_mean(i), m(0), 1e-6) << i;
    EXPECT_NEAR(loo_var(i), v(0) + noise, 1e-6) << i;
  }
}

// The joint density the tuner compares its length-scale levels by, against the Gaussian density
// of the targets under the kernel matrix built entry by entry and each hyperparameter's normal
// density written out: every constant counts when two priors differ in spread or size.
TEST(GaussianProcessTest, LogJointDensityIsTheLikelihoodTimesTheNormalisedPrior) {
  std::mt19937_64 rng(21);
  const int d = 2, n = 20;
  Eigen::MatrixXd x = RandomPoints(n, d, rng);
  Eigen::VectorXd y = Smooth(x);
  y = (y.array() - y.mean()).matrix() / std::sqrt((y.array() - y.mean()).square().mean());
  for (LengthScaleLevel level :
       {LengthScaleLevel::kShort, LengthScaleLevel::kLong, LengthScaleLevel::kEarly}) {
    GpPrior prior = GpPrior::ForDims(d, level);
    GpHyper h = SomeHyper(d);
    if (level == LengthScaleLevel::kLong) {
      prior.warp_dims = {0, 1};
      h.log_warp_a = Eigen::Vector2d(0.4, -0.3);
      h.log_warp_b = Eigen::Vector2d(-0.2, 0.1);
    }
    GaussianProcess gp(d, prior);
    ASSERT_TRUE(gp.SetDataAndHyper(x, y, h).ok());
    Eigen::MatrixXd k(n, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        k(i, j) = gp.Kernel(x.row(i).transpose(), x.row(j).transpose()) +
                  (i == j ? std::exp(h.log_noise_var) : 0.0);
    Eigen::LLT<Eigen::MatrixXd> llt(k);
    ASSERT_EQ(llt.info(), Eigen::Success);
    const Eigen::VectorXd r = (y.array() - h.mean).matrix();
    const Eigen::MatrixXd l = llt.matrixL();
    double expected = -0.5 * r.dot(llt.solve(r)) - l.diagonal().array().log().sum() -
                      0.5 * n * std::log(2 * M_PI);
    auto log_normal = [](double v, double mu, double sigma) {
      return -0.5 * std::pow((v - mu) / sigma, 2) - std::log(sigma * std::sqrt(2 * M_PI));
    };
    for (int i = 0; i < d; ++i)
      expected +=
          log_normal(h.log_lengthscale(i), prior.log_lengthscale_mu, prior.log_lengthscale_sigma);
    expected += log_normal(h.log_signal_var, prior.log_signal_mu, prior.log_signal_sigma);
    expected += log_normal(h.log_noise_var, prior.log_noise_mu, prior.log_noise_sigma);
    expected += log_normal(h.mean, 0.0, prior.mean_sigma);
    for (Eigen::Index i = 0; i < h.log_warp_a.size(); ++i)
      expected += log_normal(h.log_warp_a(i), 0.0, prior.log_warp_sigma) +
                  log_normal(h.log_warp_b(i), 0.0, prior.log_warp_sigma);
    EXPECT_NEAR(gp.LogJointDensity(), expected, 1e-8) << static_cast<int>(level);
  }
}

TEST(GaussianProcessTest, AppendingADuplicatePointKeepsTheFactorValid) {
  std::mt19937_64 rng(5);
  const int d = 2;
  Eigen::MatrixXd x = RandomPoints(10, d, rng);
  GpHyper h = SomeHyper(d);
  h.log_noise_var = std::log(1e-6);
  GaussianProcess gp(d, GpPrior::ForDims(d));
  ASSERT_TRUE(gp.SetDataAndHyper(x, Smooth(x), h).ok());
  ASSERT_TRUE(gp.Append(x.row(3).transpose(), 0.7).ok());
  Eigen::VectorXd m, v;
  gp.Predict(RandomPoints(5, d, rng), &m, &v);
  EXPECT_TRUE(m.allFinite());
  EXPECT_TRUE((v.array() > 0).all());
}

TEST(GaussianProcessTest, RecoversKnownLengthScalesFromSamplesOfAKnownGp) {
  // Draw one function from a GP with length scales 0.15 and 1.5, observe it at 120 points, fit.
  std::mt19937_64 rng(6);
  const int d = 2;
  Eigen::MatrixXd x = RandomPoints(120, d, rng);
  GpHyper truth;
  truth.log_lengthscale = Eigen::Vector2d(std::log(0.15), std::log(1.5));
  truth.log_signal_var = 0.0;
  truth.log_noise_var = std::log(1e-4);
  truth.mean = 0.0;
  GaussianProcess sampler(d, GpPrior::ForDims(d));
  ASSERT_TRUE(sampler.SetHyper(truth).ok());
  Eigen::MatrixXd k(x.rows(), x.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.rows(); ++j)
      k(i, j) = sampler.Kernel(x.row(i).transpose(), x.row(j).transpose()) + (i == j ? 1e-4 : 0);
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  ASSERT_EQ(llt.info(), Eigen::Success);
  std::normal_distribution<double> n(0.0, 1.0);
  Eigen::VectorXd z(x.rows());
  for (Eigen::Index i = 0; i < z.size(); ++i) z(i) = n(rng);
  Eigen::VectorXd y = llt.matrixL() * z;
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());

  GaussianProcess gp(d, GpPrior::ForDims(d));
  ASSERT_TRUE(gp.SetData(x, y).ok());
  GaussianProcess::FitOptions fo;
  fo.restarts = 3;
  ASSERT_TRUE(gp.Fit(fo, rng).ok());
  double l0 = std::exp(gp.hyper().log_lengthscale(0));
  double l1 = std::exp(gp.hyper().log_lengthscale(1));
  EXPECT_GT(l0, 0.15 / 2);
  EXPECT_LT(l0, 0.15 * 2);
  EXPECT_GT(l1, 5 * l0);  // the second dimension hardly matters
}

TEST(AcquisitionTest, LogExpectedImprovementMatchesTheClosedFormWhereBothAreFinite) {
  for (double mean : {-2.0, -0.3, 0.0, 0.4, 1.5, 4.0}) {
    for (double sd : {0.05, 0.5, 1.0, 3.0}) {
      const double best = 0.1;
      double z = (best - mean) / sd;
      double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
      double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
      double ei = sd * (z * cdf + pdf);
      if (ei < 1e-300) continue;
      AcquisitionValue a = LogExpectedImprovement(mean, sd, best);
      EXPECT_NEAR(a.value, std::log(ei), 1e-9 * std::max(1.0, std::fabs(std::log(ei))))
          << "mean " << mean << " sd " << sd;
    }
  }
}

TEST(AcquisitionTest, LogExpectedImprovementStaysFiniteAndOrderedWhereEiUnderflows) {
  // z from -5 to -1e6: plain EI is exactly 0 from about z = -38 on.
  double previous = std::numeric_limits<double>::infinity();
  for (double z : {-5.0, -20.0, -34.9, -35.1, -40.0, -100.0, -1e3, -1e6}) {
    AcquisitionValue a = LogExpectedImprovement(-z, 1.0, 0.0);
    EXPECT_TRUE(std::isfinite(a.value)) << z;
    EXPECT_TRUE(std::isfinite(a.dmean)) << z;
    EXPECT_LT(a.value, previous) << "log EI must fall as the mean moves away, z=" << z;
    EXPECT_LT(a.dmean, 0.0) << z;
    previous = a.value;
  }
  // Close to -z^2/2 - log(z^2) far out.
  EXPECT_NEAR(LogH(-1e4), -0.5e8 - 0.5 * std::log(2 * M_PI) - 2 * std::log(1e4), 1e-6);
  // Both sides of the switch at z = -35 agree.
  EXPECT_NEAR(LogH(-35.0 + 1e-9), LogH(-35.0 - 1e-9), 1e-6);
}

// A 2-D front of `n` random points in [0, 1]^2, some dominated.
std::vector<ObjectiveVector> RandomFront(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<ObjectiveVector> front;
  for (int i = 0; i < n; ++i) front.push_back({u(rng), u(rng)});
  return front;
}

TEST(AcquisitionTest, ExpectedHypervolumeImprovementMatchesMonteCarlo) {
  // The improvement of each draw from the exact hypervolume (pareto.h), averaged.
  std::mt19937_64 rng(21);
  const std::array<double, 2> ref = {1.1, 1.1};
  const ObjectiveVector ref_v = {1.1, 1.1};
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<ObjectiveVector> front = RandomFront(trial * 2, rng);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const std::array<double, 2> mean = {u(rng), u(rng)},
                                sigma = {0.05 + 0.3 * u(rng), 0.05 + 0.3 * u(rng)};
    const double base = Hypervolume(front, ref_v);
    std::normal_distribution<double> n(0.0, 1.0);
    const int draws = 40000;
    double sum = 0, sum2 = 0;
    std::vector<ObjectiveVector> with = front;
    with.push_back({0, 0});
    for (int k = 0; k < draws; ++k) {
      with.back() = {mean[0] + sigma[0] * n(rng), mean[1] + sigma[1] * n(rng)};
      const double hvi = Hypervolume(with, ref_v) - base;
      sum += hvi;
      sum2 += hvi * hvi;
    }
    const double mc = sum / draws;
    const double se = std::sqrt(std::max(0.0, sum2 / draws - mc * mc) / draws);
    const double exact = std::exp(LogExpectedHypervolumeImprovement(mean, sigma, front, ref).value);
    EXPECT_NEAR(exact, mc, 4 * se + 1e-9) << "trial " << trial << ", front of " << front.size();
  }
}

TEST(AcquisitionTest, ExpectedHypervolumeImprovementDerivativesMatchFiniteDifferences) {
  std::mt19937_64 rng(22);
  const std::array<double, 2> ref = {1.1, 1.1};
  std::vector<ObjectiveVector> front = RandomFront(7, rng);
  for (std::array<double, 2> mean : {std::array<double, 2>{0.3, 0.4}, {0.9, 0.05}, {1.5, 2.0}}) {
    for (std::array<double, 2> sigma : {std::array<double, 2>{0.1, 0.2}, {0.02, 0.5}}) {
      TwoObjectiveAcquisition a = LogExpectedHypervolumeImprovement(mean, sigma, front, ref);
      ASSERT_TRUE(std::isfinite(a.value));
      const double h = 1e-6;
      for (int k = 0; k < 2; ++k) {
        auto at = [&](double dm, double ds) {
          std::array<double, 2> m = mean, s = sigma;
          m[k] += dm;
          s[k] += ds;
          return LogExpectedHypervolumeImprovement(m, s, front, ref).value;
        };
        const double fd_mean = (at(h, 0) - at(-h, 0)) / (2 * h);
        const double fd_sigma = (at(0, h) - at(0, -h)) / (2 * h);
        EXPECT_NEAR(a.dmean[k], fd_mean, 1e-5 * std::max(1.0, std::fabs(fd_mean)));
        EXPECT_NEAR(a.dsigma[k], fd_sigma, 1e-5 * std::max(1.0, std::fabs(fd_sigma)));
      }
    }
  }
}

// A front in three objectives: points on the unit sphere's positive octant (DTLZ2's), some
// dominated ones among them.
std::vector<ObjectiveVector> RandomFront3(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<ObjectiveVector> out;
  for (int i = 0; i < n; ++i) {
    const double a = u(rng) * M_PI / 2, b = u(rng) * M_PI / 2, r = 0.8 + 0.4 * u(rng);
    out.push_back({r * std::cos(a) * std::cos(b), r * std::cos(a) * std::sin(b), r * std::sin(a)});
  }
  return out;
}

// The boxes cover exactly what the front leaves: cut at a lower corner below every point, their
// volumes add up to the box [corner, ref] less the front's hypervolume; and no two overlap.
TEST(AcquisitionTest, NonDominatedBoxesTileWhatTheFrontLeaves) {
  std::mt19937_64 rng(31);
  const ObjectiveVector ref = {1.1, 1.1, 1.1}, corner = {-0.5, -0.5, -0.5};
  for (int n : {0, 1, 4, 12}) {
    std::vector<ObjectiveVector> front = RandomFront3(n, rng);
    double total = 0;
    for (const HyperBox& b : NonDominatedBoxes(front, ref).Boxes()) {
      double v = 1;
      for (int k = 0; k < 3; ++k) v *= std::max(0.0, b.upper[k] - std::max(b.lower[k], corner[k]));
      total += v;
    }
    EXPECT_NEAR(total, std::pow(1.6, 3) - Hypervolume(front, ref), 1e-12) << n;
  }
}

TEST(AcquisitionTest, EhviOverBoxesIsTheTwoObjectiveFormInTwoAndMonteCarloInThree) {
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  // Two objectives: the same as the strips, to rounding.
  std::vector<ObjectiveVector> front2 = RandomFront(7, rng);
  const BoxDecomposition boxes2 = NonDominatedBoxes(front2, ObjectiveVector{1.1, 1.1});
  for (int t = 0; t < 5; ++t) {
    const std::array<double, 2> mean = {u(rng), u(rng)}, sigma = {0.05 + 0.3 * u(rng), 0.1};
    EXPECT_NEAR(LogExpectedHypervolumeImprovement(mean, sigma, boxes2).value,
                LogExpectedHypervolumeImprovement(mean, sigma, front2, {1.1, 1.1}).value, 1e-10);
  }
  // Three: against Monte Carlo over exact hypervolumes.
  const ObjectiveVector ref = {1.1, 1.1, 1.1};
  std::normal_distribution<double> n(0.0, 1.0);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<ObjectiveVector> front = RandomFront3(3 * trial + 1, rng);
    const std::vector<double> mean = {0.3 + 0.6 * u(rng), 0.3 + 0.6 * u(rng), 0.3 + 0.6 * u(rng)};
    const std::vector<double> sigma = {0.05 + 0.3 * u(rng), 0.05 + 0.3 * u(rng), 0.2};
    const double base = Hypervolume(front, ref);
    std::vector<ObjectiveVector> with = front;
    with.push_back({0, 0, 0});
    const int draws = 20000;
    double sum = 0, sum2 = 0;
    for (int k = 0; k < draws; ++k) {
      for (int j = 0; j < 3; ++j) with.back()[j] = mean[j] + sigma[j] * n(rng);
      const double hvi = Hypervolume(with, ref) - base;
      sum += hvi;
      sum2 += hvi * hvi;
    }
    const double mc = sum / draws;
    const double se = std::sqrt(std::max(0.0, sum2 / draws - mc * mc) / draws);
    const double exact = std::exp(
        LogExpectedHypervolumeImprovement(mean, sigma, NonDominatedBoxes(front, ref)).value);
    EXPECT_NEAR(exact, mc, 4 * se + 1e-9) << "trial " << trial;
  }
}

TEST(AcquisitionTest, EhviOverBoxesDerivativesMatchFiniteDifferences) {
  std::mt19937_64 rng(43);
  const BoxDecomposition boxes =
      NonDominatedBoxes(RandomFront3(9, rng), ObjectiveVector{1.1, 1.1, 1.1});
  for (std::vector<double> mean :
       {std::vector<double>{0.3, 0.4, 0.5}, {0.9, 0.05, 0.7}, {1.5, 2.0, 1.2}}) {
    const std::vector<double> sigma = {0.1, 0.02, 0.4};
    MultiObjectiveAcquisition a = LogExpectedHypervolumeImprovement(mean, sigma, boxes);
    ASSERT_TRUE(std::isfinite(a.value));
    const double h = 1e-6;
    for (int k = 0; k < 3; ++k) {
      auto at = [&](double dm, double ds) {
        std::vector<double> m = mean, s = sigma;
        m[k] += dm;
        s[k] += ds;
        return LogExpectedHypervolumeImprovement(m, s, boxes).value;
      };
      const double fd_mean = (at(h, 0) - at(-h, 0)) / (2 * h);
      const double fd_sigma = (at(0, h) - at(0, -h)) / (2 * h);
      EXPECT_NEAR(a.dmean[k], fd_mean, 1e-5 * std::max(1.0, std::fabs(fd_mean)));
      EXPECT_NEAR(a.dsigma[k], fd_sigma, 1e-5 * std::max(1.0, std::fabs(fd_sigma)));
    }
  }
}

TEST(AcquisitionTest, LogExpectedHypervolumeImprovementStaysFiniteWhereItUnderflows) {
  // Moving the prediction away behind the front: EHVI itself reaches 0 long before the end.
  std::vector<ObjectiveVector> front = {{0.2, 0.8}, {0.5, 0.5}, {0.8, 0.2}};
  double previous = std::numeric_limits<double>::infinity();
  for (double shift : {0.0, 1.0, 5.0, 20.0, 100.0}) {
    TwoObjectiveAcquisition a = LogExpectedHypervolumeImprovement(
        {0.6 + shift * 0.05, 0.6 + shift * 0.05}, {0.05, 0.05}, front, {1.0, 1.0});
    EXPECT_TRUE(std::isfinite(a.value)) << shift;
    EXPECT_LT(a.value, previous) << shift;
    EXPECT_GT(a.dmean[0], -1e300);
    EXPECT_LT(a.dmean[0], 0.0) << "a worse mean lowers EHVI";
    previous = a.value;
  }
}

TEST(AcquisitionTest, DerivativesMatchFiniteDifferences) {
  for (double mean : {-1.0, 0.2, 3.0, 12.0}) {
    for (double sd : {0.1, 1.0, 2.5}) {
      AcquisitionValue a = LogExpectedImprovement(mean, sd, 0.0);
      const double h = 1e-6;
      double dm = (LogExpectedImprovement(mean + h, sd, 0.0).value -
                   LogExpectedImprovement(mean - h, sd, 0.0).value) /
                  (2 * h);
      double ds = (LogExpectedImprovement(mean, sd + h, 0.0).value -
                   LogExpectedImprovement(mean, sd - h, 0.0).value) /
                  (2 * h);
      EXPECT_NEAR(a.dmean, dm, 1e-5 * std::max(1.0, std::fabs(dm))) << mean << " " << sd;
      EXPECT_NEAR(a.dsigma, ds, 1e-5 * std::max(1.0, std::fabs(ds))) << mean << " " << sd;
    }
  }
}

TEST(AcquisitionTest, ErfcxAndLogNormalCdfAreAccurate) {
  // long double reaches exp(3600) and erfc(60): a reference on both sides of the switch at 25.
  for (double x : {0.0, 0.5, 2.0, 10.0, 24.9, 25.1, 60.0}) {
    long double lx = x;
    long double ref = std::exp(lx * lx) * std::erfc(lx);
    EXPECT_NEAR(static_cast<double>(Erfcx(x) / ref), 1.0, 1e-11) << x;
  }
  EXPECT_NEAR(LogNormalCdf(0.0), std::log(0.5), 1e-15);
  EXPECT_NEAR(LogNormalCdf(-4.99), std::log(0.5 * std::erfc(4.99 / std::sqrt(2.0))), 1e-12);
  EXPECT_NEAR(LogNormalCdf(-5.01), std::log(0.5 * std::erfc(5.01 / std::sqrt(2.0))), 1e-12);
  EXPECT_TRUE(std::isfinite(LogNormalCdf(-1e4)));
}

TEST(OutputTransformTest, PreservesRankAndPullsInAHeavyTail) {
  // Losses spanning orders of magnitude, as a learning-rate sweep gives.
  Eigen::VectorXd y(12);
  y << 0.3, 0.31, 0.33, 0.35, 0.4, 0.5, 0.7, 1.2, 2.5, 10, 80, 1500;
  OutputTransform t;
  t.Fit(y, true);
  EXPECT_LT(t.lambda(), 0.5);
  Eigen::VectorXd z = t.Apply(y);
  for (Eigen::Index i = 1; i < y.size(); ++i) EXPECT_GT(z(i), z(i - 1));
  EXPECT_NEAR(z.mean(), 0.0, 1e-9);
  // The worst value no longer dwarfs the rest.
  EXPECT_LT(z.maxCoeff(), 3.0);
}

TEST(OutputTransformTest, LeavesWellBehavedValuesAlone) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(5.0, 2.0);
  Eigen::VectorXd y(50);
  for (Eigen::Index i = 0; i < y.size(); ++i) y(i) = n(rng);
  OutputTransform t;
  t.Fit(y, true);
  EXPECT_EQ(t.lambda(), 1.0);
  Eigen::VectorXd z = t.Apply(y);
  double sd = std::sqrt((y.array() - y.mean()).square().sum() / (y.size() - 1));
  for (Eigen::Index i = 0; i < y.size(); ++i) EXPECT_NEAR(z(i), (y(i) - y.mean()) / sd, 1e-9);
}

// ---- the tuner ---------------------------------------------------------------------------------

double Quadratic(const Config& c) {
  double x = std::get<double>(c.at("x")), y = std::get<double>(c.at("y"));
  return (x - 0.3) * (x - 0.3) + 2 * (y - 0.7) * (y - 0.7);
}

TEST(GpTunerTest, FindsTheMinimumOfASmoothFunction) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 1;
  auto t = MakeTuner(space, o).value();
  auto seen = Drive(*t, 25, 1, Quadratic);
  double best = 1e9;
  for (const Config& c : seen) best = std::min(best, Quadratic(c));
  EXPECT_LT(best, 1e-3);
}

TEST(GpTunerTest, SameSeedSameProposals) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 9;
  auto a = MakeTuner(space, o).value();
  auto b = MakeTuner(space, o).value();
  auto sa = Drive(*a, 15, 2, Quadratic);
  auto sb = Drive(*b, 15, 2, Quadratic);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(SameConfig(sa[i], sb[i])) << i;
  o.seed = 10;
  auto c = MakeTuner(space, o).value();
  auto sc = Drive(*c, 15, 2, Quadratic);
  EXPECT_FALSE(SameConfig(sa.back(), sc.back()));
}

double Mixed(const Config& c) {
  double lr = std::get<double>(c.at("lr"));
  auto batch = std::get<int64_t>(c.at("batch"));
  double v = std::pow(std::log10(lr) + 2.5, 2) + 0.1 * std::abs(batch - 48) / 16.0;
  if (std::get<std::string>(c.at("opt")) == "sgd")
    v += 0.5 + std::pow(std::get<double>(c.at("momentum")) - 0.9, 2);
  return v;
}

TEST(GpTunerTest, ProposalsRespectEveryKindStepAndCondition) {
  ParamSpec batch;
  batch.name = "batch";
  batch.type = ParamType::kInt;
  batch.low = 16;
  batch.high = 256;
  batch.step = 16;
  ParamSpec opt;
  opt.name = "opt";
  opt.type = ParamType::kCategorical;
  opt.values = {std::string("sgd"), std::string("adam")};
  ParamSpec momentum = Float("momentum", 0, 0.99);
  momentum.when = Condition{"opt", Condition::Op::kEq, {std::string("sgd")}, "opt == sgd"};
  ParamSpec fixed;
  fixed.name = "epochs";
  fixed.type = ParamType::kFixed;
  fixed.value = int64_t{3};
  SearchSpace space({Float("lr", 1e-5, 1, true), batch, opt, momentum, fixed});
  TunerOptions o;
  o.seed = 3;
  auto t = MakeTuner(space, o).value();
  auto seen = Drive(*t, 30, 3, Mixed);
  for (const Config& c : seen) {
    EXPECT_TRUE(space.Validate(c).ok()) << space.Validate(c).message();
    EXPECT_EQ(std::get<int64_t>(c.at("batch")) % 16, 0);
    EXPECT_EQ(c.count("momentum"), std::get<std::string>(c.at("opt")) == "sgd" ? 1u : 0u);
  }
  // It learned something: the model's picks beat the initial design's.
  double first = 1e9, later = 1e9;
  for (size_t i = 0; i < seen.size(); ++i)
    (i < 6 ? first : later) = std::min(i < 6 ? first : later, Mixed(seen[i]));
  EXPECT_LT(later, first);
}

TEST(GpTunerTest, ABatchHoldsNoNearDuplicates) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1), Float("z", 0, 1)});
  TunerOptions o;
  o.seed = 4;
  auto t = MakeTuner(space, o).value();
  auto f = [](const Config& c) {
    return Quadratic(c) + std::pow(std::get<double>(c.at("z")) - 0.5, 2);
  };
  std::vector<Config> seen;
  for (int i = 0; i < 12; ++i) {
    auto cs = t->Propose(1, {}).value();
    TrialOutcome out;
    out.config = cs[0];
    out.value = f(cs[0]);
    t->Observe(out);
  }
  auto batch = t->Propose(8, {}).value();
  ASSERT_EQ(batch.size(), 8u);
  Encoder enc(space);
  double closest = 1e9;
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t j = i + 1; j < batch.size(); ++j) {
      auto a = enc.Encode(batch[i]).x, b = enc.Encode(batch[j]).x;
      double d2 = 0;
      for (size_t k = 0; k < a.size(); ++k) d2 += (a[k] - b[k]) * (a[k] - b[k]);
      closest = std::min(closest, std::sqrt(d2));
    }
  EXPECT_GT(closest, 0.02) << "two members of the batch are near-duplicates";
  // And pending trials count: the next proposal keeps away from all eight.
  auto next = t->Propose(1, batch).value();
  ASSERT_EQ(next.size(), 1u);
  for (const Config& b : batch) EXPECT_FALSE(SameConfig(b, next[0]));
}

TEST(GpTunerTest, LearnsToAvoidAnInfeasibleRegion) {
  // Batch sizes above 600 run out of memory (exit 3), and the best feasible value is at 600.
  ParamSpec batch;
  batch.name = "batch";
  batch.type = ParamType::kInt;
  batch.low = 16;
  batch.high = 2048;
  batch.log = true;
  SearchSpace space({batch, Float("lr", 1e-4, 1, true)});
  TunerOptions o;
  o.seed = 5;
  auto t = MakeTuner(space, o).value();
  int infeasible_late = 0, late = 0;
  for (int i = 0; i < 40; ++i) {
    Config c = t->Propose(1, {}).value()[0];
    TrialOutcome out;
    out.config = c;
    int64_t b = std::get<int64_t>(c.at("batch"));
    if (b > 600) {
      out.kind = TrialOutcome::Kind::kInfeasible;
    } else {
      out.value = -std::log(static_cast<double>(b)) +
                  std::pow(std::log10(std::get<double>(c.at("lr"))) + 2, 2);
    }
    if (i >= 20) {
      ++late;
      infeasible_late += b > 600;
    }
    t->Observe(out);
  }
  // Without the feasibility model it would keep asking for the largest batches.
  EXPECT_LE(infeasible_late, late / 5);
}

TEST(GpTunerTest, ExhaustsASmallDiscreteSpaceWithoutRepeating) {
  ParamSpec a;
  a.name = "a";
  a.type = ParamType::kCategorical;
  a.values = {int64_t{1}, int64_t{2}, int64_t{3}};
  ParamSpec b;
  b.name = "b";
  b.type = ParamType::kInt;
  b.low = 0;
  b.high = 2;
  SearchSpace space({a, b});
  TunerOptions o;
  o.seed = 2;
  auto t = MakeTuner(space, o).value();
  std::vector<Config> seen;
  for (int i = 0; i < 12; ++i) {
    auto cs = t->Propose(1, {}).value();
    if (cs.empty()) break;
    for (const Config& s : seen) EXPECT_FALSE(SameConfig(s, cs[0]));
    seen.push_back(cs[0]);
    TrialOutcome out;
    out.config = cs[0];
    out.value = static_cast<double>(std::get<int64_t>(cs[0].at("a")) * 3 +
                                    std::get<int64_t>(cs[0].at("b")));
    t->Observe(out);
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(GpTunerTest, MaximisationFindsTheMaximum) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 6;
  o.maximize = true;
  auto t = MakeTuner(space, o).value();
  auto seen = Drive(*t, 25, 1, [](const Config& c) { return -Quadratic(c); });
  double best = -1e9;
  for (const Config& c : seen) best = std::max(best, -Quadratic(c));
  EXPECT_GT(best, -1e-3);
}

TEST(GpTunerTest, UpperConfidenceBoundAlsoWorks) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 7;
  o.acquisition = Acquisition::kUcb;
  auto t = MakeTuner(space, o).value();
  auto seen = Drive(*t, 30, 1, Quadratic);
  double best = 1e9;
  for (const Config& c : seen) best = std::min(best, Quadratic(c));
  EXPECT_LT(best, 1e-2);
  EXPECT_FALSE(ParseAcquisition("pi").ok());
}

// ---- cost-aware proposals (EI-cool)
// ---------------------------------------------------------------

TEST(CostExponentTest, CoolsFromOneAtTheStartToZeroWhenTheBudgetIsSpent) {
  EXPECT_EQ(CostExponent(0), 1.0);
  EXPECT_DOUBLE_EQ(CostExponent(0.25), 0.75);
  EXPECT_DOUBLE_EQ(CostExponent(0.9), 0.1);
  EXPECT_EQ(CostExponent(1), 0.0);
  EXPECT_EQ(CostExponent(1.7), 0.0) << "a budget overrun is still the end";
  EXPECT_EQ(CostExponent(-0.2), 1.0);
  EXPECT_EQ(CostExponent(std::nan("")), 1.0);
}

// x decides the objective; y only the cost: y < 0.5 is the cheap region, 20x cheaper.
bool Cheap(const Config& c) { return std::get<double>(c.at("y")) < 0.5; }
double XOnly(const Config& c) { return std::pow(std::get<double>(c.at("x")) - 0.3, 2); }
TrialOutcome WithCost(const Config& c) {
  TrialOutcome o;
  o.config = c;
  o.value = XOnly(c);
  o.cost = Cheap(c) ? 10.0 : 200.0;
  return o;
}

// The proposals after the initial design, one at a time, with the budget `spent` throughout.
std::vector<Config> DriveWithCosts(bool cost_aware, double spent, int evals) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 11;
  o.cost_aware = cost_aware;
  auto t = MakeTuner(space, o).value();
  t->SetBudgetSpent(spent);
  std::vector<Config> after_initial;
  for (int i = 0; i < evals; ++i) {
    Config c = t->Propose(1, {}).value().at(0);
    t->Observe(WithCost(c));
    if (i >= 6) after_initial.push_back(c);
  }
  return after_initial;
}

TEST(GpTunerTest, CostAwareProposalsGoToTheCheapRegionWhileTheBudgetIsYoung) {
  const std::vector<Config> aware = DriveWithCosts(true, 0.1, 26);
  const std::vector<Config> plain = DriveWithCosts(false, 0.1, 26);
  auto cheap = [](const std::vector<Config>& cs) {
    return static_cast<int>(std::count_if(cs.begin(), cs.end(), Cheap));
  };
  const int n = static_cast<int>(aware.size());
  EXPECT_GE(cheap(aware), n * 8 / 10) << "alpha 0.9: a 20x dearer region is worth little";
  EXPECT_GT(cheap(aware), cheap(plain) + 3) << "the objective alone does not care about y";
  // And it still optimises: the cheap region holds the same minimum.
  double best = 1e9;
  for (const Config& c : aware) best = std::min(best, XOnly(c));
  EXPECT_LT(best, 1e-3);
}

TEST(GpTunerTest, WithTheBudgetSpentCostAwareIsPlainExpectedImprovement) {
  // The same history told to both; alpha = 0 leaves the acquisition exactly log EI.
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 12;
  auto plain = MakeTuner(space, o).value();
  o.cost_aware = true;
  auto aware = MakeTuner(space, o).value();
  aware->SetBudgetSpent(1.0);
  for (int i = 0; i < 12; ++i) {
    std::vector<Config> a = aware->Propose(2, {}).value();
    std::vector<Config> p = plain->Propose(2, {}).value();
    ASSERT_EQ(a.size(), p.size());
    for (size_t j = 0; j < a.size(); ++j) {
      EXPECT_TRUE(SameConfig(a[j], p[j])) << "round " << i;
      aware->Observe(WithCost(a[j]));
      plain->Observe(WithCost(p[j]));
    }
  }
}

TEST(GpTunerTest, CostsThatAreUnknownOrNotPositiveAreIgnored) {
  // Only bad costs: no cost model, so the proposals are plain EI's.
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 13;
  auto plain = MakeTuner(space, o).value();
  o.cost_aware = true;
  auto aware = MakeTuner(space, o).value();
  const double bad[] = {0.0, -3.0, std::nan(""), HUGE_VAL};
  for (int i = 0; i < 12; ++i) {
    Config c = plain->Propose(1, {}).value().at(0);
    Config d = aware->Propose(1, {}).value().at(0);
    ASSERT_TRUE(SameConfig(c, d)) << "round " << i;
    TrialOutcome out = WithCost(c);
    plain->Observe(out);
    if (i % 5 == 4) {
      out.cost.reset();
    } else {
      out.cost = bad[i % 4];
    }
    aware->Observe(out);
  }
}

// What `hyperpack ask` does at each call: a tuner built anew, the state the last call kept
// restored, every trial observed. It proposes what a tuner that lived through the whole study
// proposes (as `hyperpack run` keeps one), past the 40 trials from which the model is refitted
// only as the trials grow, and keeps the same state; on an objective flat in pieces too, where
// the long level contests the short one, the loser's optimum warm-starts its next fit, and past
// those 40 trials the living tuner extends its factor by each new point, some of them a plateau's
// near-duplicates (factored whole instead, the two part by 3e-4 from proposal 41).
TEST(GpTunerTest, ATunerRebuiltFromItsStateProposesWhatTheLivingOneDoes) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1), Float("z", 1e-3, 1, true)});
  auto f = [](const Config& c) {
    return Quadratic(c) + std::abs(std::log10(std::get<double>(c.at("z"))) + 2) / 4;
  };
  for (const bool steps : {false, true}) {
    TunerOptions o;
    o.seed = 7;
    auto living = MakeTuner(space, o).value();
    std::vector<TrialOutcome> seen;
    std::string state;
    for (int k = 0; k < 60; ++k) {
      auto rebuilt = MakeTuner(space, o).value();
      rebuilt->RestoreState(state);
      for (const TrialOutcome& t : seen) rebuilt->Observe(t);
      auto a = living->Propose(1, {});
      auto b = rebuilt->Propose(1, {});
      ASSERT_TRUE(a.ok() && b.ok());
      for (const char* name : {"x", "y", "z"})
        ASSERT_NEAR(std::get<double>(a->front().at(name)), std::get<double>(b->front().at(name)),
                    1e-6)
            << "proposal " << k << ", " << name << (steps ? ", steps" : "");
      state = rebuilt->SaveState();
      EXPECT_EQ(state, living->SaveState()) << "proposal " << k;
      TrialOutcome t;
      t.config = a->front();
      t.value = steps ? std::round(Quadratic(t.config) * 4) : f(t.config);
      living->Observe(t);
      seen.push_back(t);
    }
    // Contested (the third word) only where values tie.
    EXPECT_EQ(state.rfind(steps ? "gp2 " : "gp2 0 0 ", 0), 0u) << state;
    EXPECT_EQ(state.substr(6, 1), steps ? "1" : "0") << state;
    // A batch too: its fantasies, on an objective flat in pieces (contested) or not.
    auto rebuilt = MakeTuner(space, o).value();
    rebuilt->RestoreState(state);
    for (const TrialOutcome& t : seen) rebuilt->Observe(t);
    auto a = living->Propose(8, {}).value();
    auto b = rebuilt->Propose(8, {}).value();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      for (const char* name : {"x", "y", "z"})
        EXPECT_NEAR(std::get<double>(a[i].at(name)), std::get<double>(b[i].at(name)), 1e-6)
            << "batch member " << i << ", " << name << (steps ? ", steps" : "");
  }
}

// The Sobol sampler a gp tuner with options `o` draws from: the same seed.
std::unique_ptr<Tuner> SequenceOf(const SearchSpace& space, const TunerOptions& o) {
  TunerOptions sequence_options;
  sequence_options.algorithm = TunerAlgorithm::kSobol;
  sequence_options.seed = o.seed;
  return MakeTuner(space, sequence_options).value();
}

// random_fraction 0.5: after the initial design every other trial is the Sobol sequence's (the
// same configuration the Sobol sampler proposes at that trial), the rest the model's; a tuner
// rebuilt from its state and the trials each time makes the same choices.
TEST(GpTunerTest, ARandomFractionGivesEveryOtherTrialAfterTheInitialDesignToTheSequence) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 5;
  o.random_fraction = 0.5;
  auto tuner = MakeTuner(space, o).value();
  auto sobol = SequenceOf(space, o);
  std::vector<TrialOutcome> seen;
  int drawn = 0;
  for (int k = 0; k < 21; ++k) {
    auto rebuilt = MakeTuner(space, o).value();
    rebuilt->RestoreState(tuner->SaveState());
    for (const TrialOutcome& t : seen) rebuilt->Observe(t);
    const Config c = tuner->Propose(1, {}).value().at(0);
    const Config s = sobol->Propose(1, {}).value().at(0);
    EXPECT_TRUE(SameConfig(rebuilt->Propose(1, {}).value().at(0), c)) << "trial " << k;
    const int initial = 5;  // max(5, dims + 1)
    const bool from_sequence = k < initial || (k - initial) % 2 == 1;
    EXPECT_EQ(SameConfig(c, s), from_sequence) << "trial " << k;
    drawn += k >= initial && SameConfig(c, s);
    TrialOutcome t;
    t.config = c;
    t.value = Quadratic(c);
    tuner->Observe(t);
    sobol->Observe(t);
    seen.push_back(t);
  }
  EXPECT_EQ(drawn, 8) << "half of the 16 trials after the initial design";
  // In a batch the share holds too: of 8 more, 4 are the sequence's next points.
  const std::vector<Config> batch = tuner->Propose(8, {}).value();
  const std::vector<Config> points = sobol->Propose(4, {}).value();
  int matched = 0;
  for (const Config& p : points)
    matched +=
        std::any_of(batch.begin(), batch.end(), [&](const Config& b) { return SameConfig(b, p); });
  EXPECT_EQ(matched, 4);
}

// initial_full_trials: every proposal is the Sobol sequence's, however many trials a pruner
// stopped at a rung, until that many trials have a final value; then the model proposes, and a
// tuner rebuilt from its state and the trials proposes the same.
TEST(GpTunerTest, ProposalsAreDrawnUntilEnoughTrialsHaveAFinalValue) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 5;
  o.initial_full_trials = 3;
  auto tuner = MakeTuner(space, o).value();
  auto sobol = SequenceOf(space, o);
  std::vector<TrialOutcome> seen;
  int completed = 0;
  for (int k = 0; k < 15; ++k) {  // past the initial design of 5: drawn for the final values
    const Config c = tuner->Propose(1, {}).value().at(0);
    EXPECT_TRUE(SameConfig(c, sobol->Propose(1, {}).value().at(0)))
        << "trial " << k << ", " << completed << " completed";
    TrialOutcome t;
    t.config = c;
    t.value = Quadratic(c);
    if (k % 5 == 4) {
      ++completed;
    } else {
      t.kind = TrialOutcome::Kind::kPruned;
      t.resource = 1;
    }
    tuner->Observe(t);
    sobol->Observe(t);
    seen.push_back(t);
  }
  ASSERT_EQ(completed, 3);
  auto rebuilt = MakeTuner(space, o).value();
  rebuilt->RestoreState(tuner->SaveState());
  for (const TrialOutcome& t : seen) rebuilt->Observe(t);
  const Config model = tuner->Propose(1, {}).value().at(0);
  EXPECT_FALSE(SameConfig(model, sobol->Propose(1, {}).value().at(0)));
  EXPECT_TRUE(SameConfig(rebuilt->Propose(1, {}).value().at(0), model));
}

// A state saved before contests ("gp1", no CONTESTED word, no rival) restores: its long level
// is a contested one.
TEST(GpTunerTest, AStateFromBeforeContestsRestoresItsLongLevelAsContested) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 5;
  auto living = MakeTuner(space, o).value();
  for (int n = 0; n < 36; ++n) {
    TrialOutcome r;
    r.config = living->Propose(1, {}).value().front();
    r.value = std::round(Quadratic(r.config) * 4);
    living->Observe(r);
  }
  living->Propose(1, {}).value();
  std::istringstream words(living->SaveState());
  std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
  ASSERT_GE(w.size(), 6u);
  ASSERT_EQ(w[0] + w[1] + w[2], "gp211") << "long and contested at 36 trials";
  // gp1 LEVEL DIMS WARPED FITTED_N THETA: theta has 2 + 3 + 2 x 2 numbers.
  std::string old = "gp1 1";
  for (size_t i = 3; i < 3 + 3 + 9; ++i) old += " " + w.at(i);
  auto rebuilt = MakeTuner(space, o).value();
  rebuilt->RestoreState(old);
  EXPECT_EQ(rebuilt->SaveState().rfind("gp2 1 1 2 2 ", 0), 0u) << rebuilt->SaveState();
  // A short level was never contested (five numbers: no warping).
  std::string short_level = "gp1 0 2 0 " + w[5];
  for (size_t i = 6; i < 6 + 5; ++i) short_level += " " + w[i];
  auto other = MakeTuner(space, o).value();
  other->RestoreState(short_level);
  EXPECT_EQ(other->SaveState().rfind("gp2 0 0 2 0 36 ", 0), 0u) << other->SaveState();
}

// A state that is not this tuner's (damaged, of another space, of a later format) is ignored:
// the tuner fits anew, as one given no state.
TEST(GpTunerTest, AStateThatIsNotItsOwnIsIgnored) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 3;
  auto with_state = [&](const std::string& state) {
    auto t = MakeTuner(space, o).value();
    t->RestoreState(state);
    for (int i = 0; i < 12; ++i) {
      TrialOutcome r;
      r.config = {{"x", i / 12.0}, {"y", (i * 7 % 12) / 12.0}};
      r.value = Quadratic(r.config);
      t->Observe(r);
    }
    return t->Propose(1, {}).value().front();
  };
  const Config fresh = with_state("");
  for (const std::string& bad :
       {std::string("garbage"), std::string("gp1 0 3 0 12 0 0 0 0 0 0"),
        std::string("gp3 0 0 2 0 12 0 0 0 -6 0"), std::string("gp1 0 2 0 12 0 nan 0 -6 0"),
        std::string("gp1 0 2 0 12 0 0"), std::string("gp1 3 2 0 12 0 0 0 -6 0"),
        std::string("gp2 0 2 2 0 12 0 0 0 -6 0"), std::string("gp2 0 1 2 0 12 0 0 0 -6 0 1 0"),
        std::string("gp2 0 1 2 0 12 0 0 0 -6 0 5 0 0 0 -6 0")})
    EXPECT_EQ(with_state(bad), fresh) << bad;
}

// Rungs that mislead: after one epoch the best configurations sit by x = 0.2, at the end by 0.8,
// and only two trials have ended. The highest-rung model (BOHB's rule: a level needs d + 2 = 3
// values) has only the first rung to go on and proposes by 0.2; the joint model of (x, fidelity)
// has the two full-resource values too and is asked at the full resource: it proposes by 0.8.
TEST(GpTunerTest, TheJointFidelityModelFollowsFullResourceValuesOverMisleadingRungs) {
  SearchSpace space({Float("x", 0, 1)});
  auto propose = [&](TunerOptions::FidelityModel model) {
    TunerOptions o;
    o.seed = 5;
    o.fidelity_model = model;
    o.min_resource = 1;
    o.max_resource = 27;
    auto tuner = MakeTuner(space, o).value();
    for (int i = 0; i < 12; ++i) {
      TrialOutcome rung;
      rung.config = {{"x", (i + 0.5) / 12}};
      rung.kind = TrialOutcome::Kind::kPruned;
      rung.resource = 1;
      rung.value = 1 + std::pow((i + 0.5) / 12 - 0.2, 2);
      tuner->Observe(rung);
    }
    for (double x : {0.2, 0.8}) {
      TrialOutcome done;
      done.config = {{"x", x}};
      done.value = std::pow(x - 0.8, 2);
      tuner->Observe(done);
    }
    return std::get<double>(tuner->Propose(1, {}).value().at(0).at("x"));
  };
  const double highest = propose(TunerOptions::FidelityModel::kHighestRung);
  const double joint = propose(TunerOptions::FidelityModel::kJoint);
  EXPECT_LT(std::abs(highest - 0.2), 0.2) << highest;
  EXPECT_LT(std::abs(joint - 0.8), 0.2) << joint;
}

// Trials a pruner stopped early in one basin enter the model at the completed level as no better
// than their own values there: the next proposal goes to the other basin, where completed trials
// alone (the stopped ones left out) would send it back to the stopped one.
TEST(GpTunerTest, TrialsStoppedBelowTheModelledLevelSteerProposalsAway) {
  SearchSpace space({Float("x", 0, 1)});
  auto propose = [&](bool with_stopped) {
    TunerOptions o;
    o.seed = 3;
    auto tuner = MakeTuner(space, o).value();
    ObserveTwoBasins(*tuner, with_stopped);
    return std::get<double>(tuner->Propose(1, {}).value().at(0).at("x"));
  };
  const double alone = propose(false);
  const double steered = propose(true);
  EXPECT_LT(alone, 0.5) << "the completed trials alone favour the left basin";
  EXPECT_GT(steered, 0.5) << steered;
}

// A joint tuner's state holds the model's extra input: a tuner rebuilt from it proposes what the
// living one does, and a tuner of the highest-rung model ignores it (another model's state).
TEST(GpTunerTest, AJointTunersStateRestoresOnlyIntoAJointTuner) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  TunerOptions o;
  o.seed = 11;
  o.fidelity_model = TunerOptions::FidelityModel::kJoint;
  o.min_resource = 1;
  o.max_resource = 9;
  std::vector<TrialOutcome> seen;
  for (int i = 0; i < 16; ++i) {
    TrialOutcome t;
    t.config = {{"x", (i % 4 + 0.5) / 4}, {"y", (i / 4 + 0.5) / 4}};
    t.value = Quadratic(t.config) + (i % 3 == 2 ? 0 : 0.3 / (1 + i % 3));
    if (i % 3 != 2) {
      t.kind = TrialOutcome::Kind::kPruned;
      t.resource = i % 3 == 0 ? 1 : 3;
    }
    seen.push_back(t);
  }
  auto living = MakeTuner(space, o).value();
  for (const TrialOutcome& t : seen) living->Observe(t);
  const Config first = living->Propose(1, {}).value().at(0);
  const std::string state = living->SaveState();
  ASSERT_EQ(state.rfind("gp2 0 0 3 ", 0), 0u) << state;  // two dimensions and the fidelity
  auto rebuilt = MakeTuner(space, o).value();
  rebuilt->RestoreState(state);
  for (const TrialOutcome& t : seen) rebuilt->Observe(t);
  for (const char* name : {"x", "y"})
    EXPECT_NEAR(std::get<double>(rebuilt->Propose(1, {}).value().at(0).at(name)),
                std::get<double>(first.at(name)), 1e-6)
        << name;
  TunerOptions plain = o;
  plain.fidelity_model = TunerOptions::FidelityModel::kHighestRung;
  auto other = MakeTuner(space, plain).value();
  other->RestoreState(state);
  for (const TrialOutcome& t : seen) other->Observe(t);
  EXPECT_TRUE(other->Propose(1, {}).ok());
  // The short level (16 trials, past the early level's 5 per dimension), two dimensions: the
  // fidelity is not an input.
  EXPECT_EQ(other->SaveState().rfind("gp2 0 0 2 ", 0), 0u) << other->SaveState();
}

// The objective model's length-scale level, as its saved state names it (its level, then
// whether the long level contests it): early (2) while the model holds fewer than 5 trials per
// dimension, then short (0); once an incumbent's value is shared, each refit fits the long level
// (1) too and keeps whichever the data favour. A trend across plateaus ends long; plateaus at the
// bottom of a rugged objective (many small basins, floored) keep short scales.
TEST(GpTunerTest, OnceTheIncumbentIsSharedTheDataChooseBetweenTheLongAndTheShortLevel) {
  SearchSpace space({Float("x", 0, 1), Float("y", 0, 1)});
  // The levels, and whether the long level contests, one character per proposal.
  auto levels = [&](auto objective) {
    TunerOptions o;
    o.seed = 5;
    auto t = MakeTuner(space, o).value();
    std::pair<std::string, std::string> out;
    for (int n = 0; n < 40; ++n) {
      const Config c = t->Propose(1, {}).value().front();
      const std::string state = t->SaveState();
      const bool ours = state.size() > 6 && state.rfind("gp2 ", 0) == 0;
      out.first += ours ? state.substr(4, 1) : "-";
      out.second += ours ? state.substr(6, 1) : "-";
      TrialOutcome r;
      r.config = c;
      r.value = objective(c);
      t->Observe(r);
    }
    return out;
  };
  // Five trials of the initial design, then one proposal for each trial modelled: two dimensions.
  const std::string smooth = "-----" + std::string(5, '2') + std::string(30, '0');
  const std::string never = "-----" + std::string(35, '0');
  EXPECT_EQ(levels(Quadratic), std::make_pair(smooth, never));
  const auto [trend, contest] =
      levels([](const Config& c) { return std::round(Quadratic(c) * 4); });
  const size_t first = contest.find('1');
  ASSERT_NE(first, std::string::npos) << contest;
  EXPECT_EQ(contest.find_first_not_of('1', first), std::string::npos) << contest;  // for good
  EXPECT_EQ(trend.substr(0, first), smooth.substr(0, first)) << trend;
  EXPECT_EQ(trend.substr(30), std::string(10, '1')) << trend;
  const auto rugged = levels([](const Config& c) {
    const double x = std::get<double>(c.at("x")), y = std::get<double>(c.at("y"));
    return std::max(std::sin(14 * x) * std::cos(14 * y), -0.3);
  });
  EXPECT_NE(rugged.second.find('1'), std::string::npos) << rugged.second;
  EXPECT_EQ(rugged.first, smooth);
  // Values that all tie are no plateau at the top: a region with no signal yet (a classifier that
  // predicts nothing scores log 10 wherever it is tried), and nothing contests.
  EXPECT_EQ(levels([](const Config&) { return std::log(10.0); }), std::make_pair(smooth, never));
}

TEST(OutputTransformTest, AnIncumbentIsSharedOnlyWhenSomeValueIsWorse) {
  EXPECT_TRUE(IncumbentShared({0.2, 0.2, 0.5}));
  EXPECT_FALSE(IncumbentShared({0.2, 0.3, 0.3}));
  EXPECT_FALSE(IncumbentShared({2.3, 2.3, 2.3, 2.3}));
  EXPECT_FALSE(IncumbentShared({0.2}));
  EXPECT_EQ(PlateauMargin({2.3, 2.3, 2.3}), 0.0);
  EXPECT_DOUBLE_EQ(PlateauMargin({0.2, 0.2, 0.25, 0.5}), 0.05);
}

}  // namespace
}  // namespace hyperpack::tuner
