// Helpers the tuner's tests share: a float parameter, and a loop that drives a tuner over a
// function in batches (each batch proposed with nothing pending, then observed whole).
#ifndef HYPERPACK_TESTS_TUNER_DRIVE_H_
#define HYPERPACK_TESTS_TUNER_DRIVE_H_

#include <gtest/gtest.h>

#include <string>
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

}  // namespace hyperpack::tuner

#endif  // HYPERPACK_TESTS_TUNER_DRIVE_H_
