// Helpers the tuner's tests share: parameters and spaces, a loop that drives a tuner over a
// function in batches (each batch proposed with nothing pending, then observed whole), and the
// same over standard problems of several objectives (ZDT1, DTLZ2).
#ifndef HYPERPACK_TESTS_TUNER_DRIVE_H_
#define HYPERPACK_TESTS_TUNER_DRIVE_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/tuner/tuner.h"

namespace hyperpack::tuner {

inline ParamSpec Float(const std::string& name, double low, double high, bool log = false) {
  ParamSpec p;
  p.name = name;
  p.type = ParamType::kFloat;
  p.low = low;
  p.high = high;
  p.log = log;
  return p;
}

// On x in [0, 1]: five completed trials whose best is in the left basin (0.28 at x = 0.1), and,
// with `stopped`, six trials a pruner stopped at resource 1 with value 1 over x in [0, 0.2]. Each
// value for each of `objectives` objectives (0: the one value alone).
inline void ObserveTwoBasins(Tuner& tuner, bool stopped, size_t objectives = 0) {
  auto outcome = [&](double x, double v) {
    TrialOutcome t;
    t.config = {{"x", x}};
    t.value = v;
    t.values.assign(objectives, v);
    return t;
  };
  for (auto [x, v] : {std::pair{0.1, 0.28}, {0.3, 0.45}, {0.5, 0.5}, {0.7, 0.45}, {0.9, 0.3}})
    tuner.Observe(outcome(x, v));
  for (double x : {0.0, 0.04, 0.08, 0.12, 0.16, 0.2}) {
    if (!stopped) break;
    TrialOutcome t = outcome(x, 1.0);
    t.kind = TrialOutcome::Kind::kPruned;
    t.resource = 1;
    tuner.Observe(t);
  }
}

inline ParamSpec Int(const std::string& name, int64_t low, int64_t high, int64_t step = 1,
                     bool log = false) {
  ParamSpec p;
  p.name = name;
  p.type = ParamType::kInt;
  p.low = static_cast<double>(low);
  p.high = static_cast<double>(high);
  p.step = step;
  p.log = log;
  return p;
}

// Floats x0, x1, ... in [0, 1].
inline SearchSpace UnitCube(int dims) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < dims; ++i) params.push_back(Float("x" + std::to_string(i), 0, 1));
  return SearchSpace(params);
}

inline std::vector<double> Coordinates(const Config& c, int dims) {
  std::vector<double> x;
  for (int i = 0; i < dims; ++i) x.push_back(std::get<double>(c.at("x" + std::to_string(i))));
  return x;
}

// Proposes `batch` at a time until `evals` configurations are observed with f's values; returns
// them in order.
template <typename F>
std::vector<Config> Drive(Tuner& t, int evals, int batch, F f) {
  std::vector<Config> seen;
  while (static_cast<int>(seen.size()) < evals) {
    auto cs = t.Propose(batch, {});
    EXPECT_TRUE(cs.ok()) << cs.status().message();
    for (const Config& c : *cs) {
      TrialOutcome o;
      o.config = c;
      o.value = f(c);
      t.Observe(o);
      seen.push_back(c);
    }
  }
  return seen;
}

// ---- several objectives

using Problem = std::function<std::vector<double>(const std::vector<double>& x)>;

// ZDT1 (Zitzler, Deb and Thiele 2000): a convex front f2 = 1 - sqrt(f1) where x1.. are 0.
inline std::vector<double> Zdt1(const std::vector<double>& x) {
  double g = 0;
  for (size_t i = 1; i < x.size(); ++i) g += x[i];
  g = 1 + 9 * g / static_cast<double>(x.size() - 1);
  return {x[0], g * (1 - std::sqrt(x[0] / g))};
}

// DTLZ2 with m objectives (Deb et al. 2002): the front is the positive part of the unit sphere,
// reached where the last variables are 0.5.
inline std::vector<double> Dtlz2Of(const std::vector<double>& x, int m) {
  double g = 0;
  for (size_t i = m - 1; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
  std::vector<double> f(m, 1 + g);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m - 1 - i; ++j) f[i] *= std::cos(x[j] * std::numbers::pi / 2);
    if (i > 0) f[i] *= std::sin(x[m - 1 - i] * std::numbers::pi / 2);
  }
  return f;
}

struct ObjectivesRun {
  std::vector<std::vector<double>> values;  // every trial's objectives, in order
  std::vector<Config> configs;
};

// Drives a tuner over the unit cube for `evals` trials, `batch` at a time, on `f` (its
// objectives, all minimised).
inline ObjectivesRun DriveObjectives(TunerAlgorithm algorithm, const Problem& f, int dims,
                                     int objectives, int evals, int batch, uint64_t seed) {
  TunerOptions o;
  o.algorithm = algorithm;
  o.seed = seed;
  o.objectives.assign(objectives, false);
  auto tuner = MakeTuner(UnitCube(dims), o);
  EXPECT_TRUE(tuner.ok()) << tuner.status().message();
  ObjectivesRun run;
  while (tuner.ok() && static_cast<int>(run.values.size()) < evals) {
    auto cs = (*tuner)->Propose(batch, {});
    EXPECT_TRUE(cs.ok()) << cs.status().message();
    if (!cs.ok() || cs->empty()) break;
    for (const Config& c : *cs) {
      TrialOutcome out;
      out.config = c;
      out.values = f(Coordinates(c, dims));
      out.value = out.values[0];
      (*tuner)->Observe(out);
      run.values.push_back(out.values);
      run.configs.push_back(c);
    }
  }
  return run;
}

}  // namespace hyperpack::tuner

#endif  // HYPERPACK_TESTS_TUNER_DRIVE_H_
