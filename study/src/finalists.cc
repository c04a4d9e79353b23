#include "hyperpack/study/finalists.h"

#include <algorithm>
#include <cmath>

namespace hyperpack::study {

namespace {

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
  // One pass keeping the best n, not a sort of every run: the controller asks at each event of a
  // study with finalists and a time or cost budget. A run no better than the n-th kept is
  // dismissed on its value alone; configurations are compared only for the few that are better.
  std::vector<size_t> top;  // best first; ties: the earlier in `runs`
  if (n <= 0) return top;
  for (size_t i = 0; i < runs.size(); ++i) {
    const CompletedRun& r = runs[i];
    if (!std::isfinite(r.value)) continue;
    if (static_cast<int>(top.size()) == n && !objective.Better(r.value, runs[top.back()].value))
      continue;
    if (std::find(taken.begin(), taken.end(), r.config) != taken.end()) continue;
    auto same =
        std::find_if(top.begin(), top.end(), [&](size_t j) { return runs[j].config == r.config; });
    if (same != top.end()) {
      if (!objective.Better(r.value, runs[*same].value)) continue;
      top.erase(same);  // the configuration's better run takes its place
    }
    auto at = std::find_if(top.begin(), top.end(),
                           [&](size_t j) { return objective.Better(r.value, runs[j].value); });
    top.insert(at, i);
    if (static_cast<int>(top.size()) > n) top.pop_back();
  }
  return top;
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

Repeats FindRepeats(const std::vector<CompletedRun>& runs) {
  Repeats out;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].finalist || !std::isfinite(runs[i].value)) continue;
    for (size_t j = 0; j < i; ++j) {
      if (runs[j].finalist || runs[j].config != runs[i].config) continue;
      if (runs[j].value == runs[i].value)
        out.same.emplace_back(runs[i].number, runs[j].number);
      else
        out.differs = true;
      break;
    }
  }
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
  if (!finalist || FindRepeats(runs).Exact())
    return BestChoice{runs[*single].number, runs[*single].value, 1};
  // Each configuration a completed finalist re-ran, by the mean of its runs.
  return FinalistMeans(runs, objective).front();
}

}  // namespace hyperpack::study
