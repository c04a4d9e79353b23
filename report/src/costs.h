// `hyperpack best STUDY --within X` and `export --within X`: the cheapest completed trial whose
// value is within X of the best's. What a trial cost is TrialCosts' (page_data.h): the time it ran
// x the GPUs it held, or x its CPU slots where it held none. Pure.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <vector>

#include "hyperpack/report/report.h"
#include "hyperpack/storage/storage.h"
#include "page_data.h"

namespace hyperpack::report {

// The cheapest of `ranked` (completed trials, best first) whose value is within `tolerance` of
// the first's: at most `amount` worse, or `amount` x |best| worse when relative. A trial that held
// GPUs is dearer than any that held none; ties in cost go to the better value, then the earlier
// trial; a trial without a cost (one that never started) is not a candidate unless it is the
// best. nullptr when `ranked` is empty.
const storage::TrialRecord* CheapestWithin(const std::vector<const storage::TrialRecord*>& ranked,
                                           const std::map<int, TrialCost>& costs,
                                           const Tolerance& tolerance, bool maximize);

}  // namespace hyperpack::report
