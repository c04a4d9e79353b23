#include "hyperpack/study/finalists.h"

#include <algorithm>
#include <cmath>

namespace hyperpack::study {

namespace {

// Indices of the runs with a finite value, best first (ties: the lower trial number).
std::vector<size_t> RankedRuns(const std::vector<CompletedRun>& runs, const Objective& objective) {
  std::vector<size_t> order;
  for (size_t i = 0; i < runs.size(); ++i)
    if (std::isfinite(runs[i].value)) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (runs[a].value != runs[b].value) return objective.Better(runs[a].value, runs[b].value);
    return runs[a].number < runs[b].number;
  });
  return order;
}

}  // namespace

std::vector<size_t> NextFinalists(const std::vector<CompletedRun>& runs,
                                  const std::vector<Config>& taken, const Objective& objective,
                                  int n) {
  std::vector<size_t> out;
  std::vector<Config> seen = taken;
  for (size_t i : RankedRuns(runs, objective)) {
    if (static_cast<int>(out.size()) >= n) break;
    if (std::find(seen.begin(), seen.end(), runs[i].config) != seen.end()) continue;
    seen.push_back(runs[i].config);
    out.push_back(i);
  }
  return out;
}

std::optional<BestChoice> ChooseBest(const std::vector<CompletedRun>& runs,
                                     const Objective& objective) {
  std::vector<size_t> ranked = RankedRuns(runs, objective);
  if (ranked.empty()) return std::nullopt;
  // The configurations a completed finalist re-ran.
  std::vector<Config> rerun;
  for (size_t i : ranked)
    if (runs[i].finalist && std::find(rerun.begin(), rerun.end(), runs[i].config) == rerun.end())
      rerun.push_back(runs[i].config);
  if (rerun.empty()) return BestChoice{runs[ranked.front()].number, runs[ranked.front()].value, 1};
  std::optional<BestChoice> best;
  for (const Config& config : rerun) {
    BestChoice c{0, 0, 0};
    double sum = 0;
    for (size_t i : ranked) {
      if (runs[i].config != config) continue;
      c.trial = c.runs == 0 ? runs[i].number : std::min(c.trial, runs[i].number);
      sum += runs[i].value;
      ++c.runs;
    }
    c.value = sum / c.runs;
    if (!best || objective.Better(c.value, best->value) ||
        (c.value == best->value && c.trial < best->trial))
      best = c;
  }
  return best;
}

}  // namespace hyperpack::study
