#include "search.h"

#include <LBFGSB.h>

#include <algorithm>

#include "sobol.h"

namespace hyperpack::tuner {

Eigen::VectorXd ToEigen(const std::vector<double>& v) {
  return Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
}

std::vector<Eigen::VectorXd> GlobalCandidates(const Encoder& encoder, uint64_t seed) {
  std::vector<Eigen::VectorXd> out;
  const int global = std::min(2048, 384 + 48 * encoder.dims());
  SobolSequence sobol(static_cast<int>(encoder.space().size()), seed);
  for (int i = 0; i < global; ++i)
    out.push_back(ToEigen(encoder.Encode(encoder.FromUnitPerParam(sobol.Point(i))).x));
  return out;
}

namespace {

// 36 perturbations of one centre (AddLocalCandidates).
void AddAround(const Encoder& encoder, const Config& centre, std::normal_distribution<double>& step,
               std::mt19937_64& rng, std::vector<Eigen::VectorXd>* out) {
  const SearchSpace& space = encoder.space();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const Encoder::Encoded e = encoder.Encode(centre);
  for (double scale : {0.02, 0.08, 0.2}) {
    for (int k = 0; k < 12; ++k) {
      // Per-parameter coordinates of the centre, moved.
      std::vector<double> u(space.size());
      for (size_t p = 0; p < space.size(); ++p) {
        const ParamSpec& spec = space.params()[p];
        int d0 = encoder.first_dim(static_cast<int>(p));
        double base = 0.5;
        if (spec.type == ParamType::kFloat || spec.type == ParamType::kInt) {
          base = e.x[d0];
        } else if (spec.type == ParamType::kCategorical) {
          int k_cat = 0;
          for (int j = 0; j < encoder.num_dims(static_cast<int>(p)); ++j)
            if (e.x[d0 + j] > 0.5) k_cat = j;
          base = (k_cat + 0.5) / static_cast<double>(spec.values.size());
        }
        bool move = unit(rng) < 0.5;
        if (!move) {
          u[p] = base;
        } else if (spec.type == ParamType::kCategorical) {
          u[p] = unit(rng);
        } else {
          u[p] = std::clamp(base + scale * step(rng), 0.0, 1.0 - 1e-12);
        }
      }
      out->push_back(ToEigen(encoder.Encode(encoder.FromUnitPerParam(u)).x));
    }
  }
}

}  // namespace

void AddLocalCandidates(const Encoder& encoder, std::span<const Config> centres,
                        std::mt19937_64& rng, std::vector<Eigen::VectorXd>* out) {
  // One normal distribution for all centres: it keeps the second value of each pair it draws.
  std::normal_distribution<double> step(0.0, 1.0);
  for (const Config& centre : centres) AddAround(encoder, centre, step, rng, out);
}

ScoredPoint RefineContinuous(const Encoder& encoder, const std::vector<bool>& continuous,
                             const ScoredPoint& start, const AcquisitionFn& acq) {
  Config c = encoder.Decode(std::vector<double>(start.x.data(), start.x.data() + start.x.size()));
  Encoder::Encoded e = encoder.Encode(c);
  std::vector<int> free;
  for (int d = 0; d < encoder.dims(); ++d)
    if (continuous[d] && e.active[d]) free.push_back(d);
  if (free.empty()) return start;
  const int k = static_cast<int>(free.size());
  Eigen::VectorXd base = start.x;
  Eigen::VectorXd z(k), lb = Eigen::VectorXd::Zero(k), ub = Eigen::VectorXd::Ones(k);
  for (int i = 0; i < k; ++i) z(i) = base(free[i]);
  auto objective = [&](const Eigen::VectorXd& zz, Eigen::VectorXd& g) {
    Eigen::VectorXd x = base;
    for (int i = 0; i < k; ++i) x(free[i]) = zz(i);
    Eigen::VectorXd full;
    double v = acq(x, &full);
    for (int i = 0; i < k; ++i) g(i) = -full(free[i]);
    return -v;
  };
  LBFGSpp::LBFGSBParam<double> param;
  param.max_iterations = 40;
  param.epsilon = 1e-6;
  param.max_linesearch = 20;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  double f = 0;
  try {
    solver.minimize(objective, z, f, lb, ub);
  } catch (const std::exception&) {
    // The point reached so far is still a valid one.
  }
  Eigen::VectorXd x = base;
  for (int i = 0; i < k; ++i) x(free[i]) = std::clamp(z(i), 0.0, 1.0);
  // Snap to a real configuration (clamping and rounding) and score what will actually run.
  Eigen::VectorXd snapped =
      ToEigen(encoder.Encode(encoder.Decode(std::vector<double>(x.data(), x.data() + x.size()))).x);
  return {acq(snapped, nullptr), snapped};
}

bool NearPending(const Config& c, const Eigen::VectorXd& x, const std::vector<Config>& pending,
                 const std::vector<Eigen::VectorXd>& pending_x) {
  for (size_t i = 0; i < pending.size(); ++i)
    if (SameConfig(pending[i], c) || (pending_x[i] - x).norm() < kMinBatchDistance) return true;
  return false;
}

std::optional<Chosen> FirstUntaken(
    const Encoder& encoder, const std::vector<ScoredPoint>& ranked,
    const std::function<bool(const Config&, const Eigen::VectorXd&)>& taken, Tuner& fallback,
    std::span<const Config> pending) {
  for (const ScoredPoint& s : ranked) {
    Config c = encoder.Decode(std::vector<double>(s.x.data(), s.x.data() + s.x.size()));
    if (!taken(c, s.x)) return Chosen{std::move(c), s.x};
  }
  // Sobol may still find one that is new.
  auto s = fallback.Propose(1, pending);
  if (!s.ok() || s->empty()) return std::nullopt;
  return Chosen{(*s)[0], ToEigen(encoder.Encode((*s)[0]).x)};
}

}  // namespace hyperpack::tuner
