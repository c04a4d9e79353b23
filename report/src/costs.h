// What trials cost and will cost: the cheapest completed trial whose value is within X of the
// best's (`hyperpack best STUDY --within X`, `export --within X`), and each trial's cost as the
// cost model (hyperpack/tuner/cost_model.h) predicts it (`hyperpack trials`). What a trial cost
// is TrialCosts' (study_view.h): the time it ran x the GPUs it held, or x its CPU slots where it
// held none. Pure: no I/O, no clock.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "hyperpack/report/report.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/tuner/cost_model.h"
#include "study_view.h"

namespace hyperpack::report {

// The cheapest of `ranked` (completed trials, best first) whose value is within `tolerance` of
// the first's: at most `amount` worse, or `amount` x |best| worse when relative. A trial that held
// GPUs is dearer than any that held none; ties in cost go to the better value, then the earlier
// trial; a trial without a cost (one that never started) is not a candidate unless it is the
// best. nullptr when `ranked` is empty.
const storage::TrialRecord* CheapestWithin(const std::vector<const storage::TrialRecord*>& ranked,
                                           const std::map<int, TrialCost>& costs,
                                           const Tolerance& tolerance, bool maximize);

// What --within chose: `trial` (in view.trials), the value it was judged by, and the best it was
// judged against. In a study with finalists, once one has completed, configurations are compared
// rather than single runs: each a finalist re-ran, as its first run, by the mean of its runs (one
// lucky draw is no trade-off against a mean); `runs` says how many runs each value is the mean of.
struct WithinChoice {
  const storage::TrialRecord* trial = nullptr;
  double value = 0;
  int runs = 1;
  const storage::TrialRecord* best = nullptr;
  double best_value = 0;
  int best_runs = 1;
};
// nullopt where no trial has completed with a value (and met the constraints).
std::optional<WithinChoice> ChooseWithin(const StudyView& view,
                                         const std::map<int, TrialCost>& costs,
                                         const Tolerance& tolerance);

// What each trial of `trials` should cost by a cost model fitted to the completed trials' costs
// (those of one kind only, GPU-seconds or CPU-seconds: the kind most of them have; the newest 200
// of them). A trial it was fitted on is predicted leaving it out (CostModel::LeaveOneOut). Empty
// when no model can be fitted (fewer than three costs, a space with no tuned parameter).
// *gpu_seconds says the predictions' unit.
std::map<int, tuner::CostPrediction> PredictedCosts(const study::StudySpec& spec,
                                                    const std::vector<storage::TrialRecord>& trials,
                                                    const std::map<int, TrialCost>& costs,
                                                    bool* gpu_seconds);

}  // namespace hyperpack::report
