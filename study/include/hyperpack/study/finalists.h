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
#include <utility>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::study {

// A completed trial that may be the study's best (its constraints hold).
struct CompletedRun {
  int number = 0;
  Config config;
  double value = 0;  // the objective; a non-finite one is never chosen
  // A run of budget.finalists (the journal says which): a configuration trained again.
  bool finalist = false;
};

// Up to `n` configurations to train again: distinct, none in `taken`, by the best single value
// among their runs (ties: the earlier in `runs`). Each is given as the index in `runs` of that
// configuration's best run.
std::vector<size_t> NextFinalists(const std::vector<CompletedRun>& runs,
                                  const std::vector<Config>& taken, const Objective& objective,
                                  int n);

struct BestChoice {
  int trial = 0;     // the configuration's first run in `runs`
  double value = 0;  // the mean of its completed runs (its one value where it ran once)
  int runs = 1;
};
// Each configuration a completed finalist re-ran, with the mean of its completed runs, the best
// mean first (ties: the configuration whose first run is the earlier in `runs`).
std::vector<BestChoice> FinalistMeans(const std::vector<CompletedRun>& runs,
                                      const Objective& objective);

// What the re-runs (finalists, rerun_top) say of the trainings' noise: each completed re-run
// against its configuration's first run.
struct Repeats {
  // (re-run, first run) trial numbers of re-runs that returned the first run's value to the last
  // digit, in the order of `runs`.
  std::vector<std::pair<int, int>> same;
  bool differs = false;  // a re-run returned another value
  // Two repeats and no difference: the trainings have no noise (a fixed seed), so a further re-run
  // adds nothing and a mean is its one value. One repeat alone may be chance: an accuracy over a
  // fixed validation set takes few values.
  bool Exact() const { return !differs && same.size() >= 2; }
};
Repeats FindRepeats(const std::vector<CompletedRun>& runs);

// The study's best. Once a finalist has completed: among the configurations a finalist re-ran,
// the best mean over all of their completed runs. Before that, and where the re-runs repeat
// exactly (Repeats::Exact: the search then goes on), the best single run. Ties go to
// the earlier in `runs` (the controller keeps them as they completed, the reports by number, as
// each ranked its best before). nullopt where no run has a finite value. (Only finalists count: a
// configuration a tuner happened to propose twice is not thereby a candidate.)
std::optional<BestChoice> ChooseBest(const std::vector<CompletedRun>& runs,
                                     const Objective& objective);

}  // namespace hyperpack::study
