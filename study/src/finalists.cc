#include "hyperpack/study/finalists.h"

#include <algorithm>
#include <cmath>

namespace hyperpack::study {

namespace {

// Indices of the runs with a finite value, best first (ties: the earlier in `runs`).
std::vector<size_t> RankedRuns(const std::vector<CompletedRun>& runs, const Objective& objective) {
  std::vector<size_t> order;
  for (size_t i = 0; i < runs.size(); ++i)
    if (std::isfinite(runs[i].value)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return objective.Better(runs[a].value, runs[b].value);
  });
  return order;
}

// `config`'s finite runs: the first of them in `runs`, and their mean.
BestChoice MeanOf(const std::vector<CompletedRun>& runs, const Config& config, size_t* first) {
  BestChoice c{0, 0, 0};
  double sum = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!std::isfinite(runs[i].value) || runs[i].config != config) continue;
    if (c.runs == 0) {
      c.trial = runs[i].number;
      *first = i;
    }
    sum += runs[i].value;
    ++c.runs;
  }
  c.value = sum / c.runs;
  return c;
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

std::vector<BestChoice> FinalistMeans(const std::vector<CompletedRun>& runs,
                                      const Objective& objective) {
  std::vector<std::pair<BestChoice, size_t>> means;  // with the index of the first run
  std::vector<Config> seen;
  for (const CompletedRun& r : runs) {
    if (!r.finalist || !std::isfinite(r.value) ||
        std::find(seen.begin(), seen.end(), r.config) != seen.end())
      continue;
    seen.push_back(r.config);
    size_t first = 0;
    const BestChoice c = MeanOf(runs, r.config, &first);
    means.emplace_back(c, first);
  }
  std::stable_sort(means.begin(), means.end(), [&](const auto& a, const auto& b) {
    if (a.first.value != b.first.value) return objective.Better(a.first.value, b.first.value);
    return a.second < b.second;
  });
  std::vector<BestChoice> out;
  for (const auto& [c, first] : means) out.push_back(c);
  return out;
}

std::optional<BestChoice> ChooseBest(const std::vector<CompletedRun>& runs,
                                     const Objective& objective) {
  // Before a finalist has completed: the best single run, in one pass.
  std::optional<size_t> single;
  bool finalist = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!std::isfinite(runs[i].value)) continue;
    finalist = finalist || runs[i].finalist;
    if (!single || objective.Better(runs[i].value, runs[*single].value)) single = i;
  }
  if (!single) return std::nullopt;
  if (!finalist) return BestChoice{runs[*single].number, runs[*single].value, 1};
  // Each configuration a completed finalist re-ran, by the mean of its runs.
  return FinalistMeans(runs, objective).front();
}

}  // namespace hyperpack::study
