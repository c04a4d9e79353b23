// A study's finalists (budget.finalists): which completed configurations train once more at the
// end, and which configuration is then the study's best. One draw of a trial's value is noisy
// (its seed, its data order); a configuration trained twice is judged by the mean of its runs,
// which no single lucky draw decides (docs/BENCHMARKS.md, issue 49's tables).
//
// Pure functions of the completed runs; the controller and the reports call the same ones, so a
// run's summary and `hyperpack best` name the same trial.
//
// Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::study {

// A completed trial that may be the study's best (its constraints hold).
struct CompletedRun {
  int number = 0;
  Config config;
  double value = 0;  // the objective; a non-finite one is never chosen
};

// Up to `n` configurations to train again: distinct, none in `taken`, by the best single value
// among their runs (ties: the lower trial number). Each is given as the index in `runs` of that
// configuration's best run.
std::vector<size_t> NextFinalists(const std::vector<CompletedRun>& runs,
                                  const std::vector<Config>& taken, const Objective& objective,
                                  int n);

struct BestChoice {
  int trial = 0;     // the configuration's first completed run
  double value = 0;  // the mean of its completed runs (its one value where it ran once)
  int runs = 1;
};
// The study's best. `by_mean` (a study with finalists), once a configuration has completed twice:
// among the configurations that have, the best mean over their completed runs (ties: the lower
// first trial number). Otherwise the best single run. nullopt where no run has a finite value.
// Storage need not say which trials were finalists: a configuration that completed twice is one.
std::optional<BestChoice> ChooseBest(const std::vector<CompletedRun>& runs,
                                     const Objective& objective, bool by_mean);

}  // namespace hyperpack::study
