// The cheapest good trial (cheapest.h), and --within's tolerance (report.h).
#include "cheapest.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "hyperpack/text.h"

namespace hyperpack::report {

Result<Tolerance> ParseTolerance(const std::string& text) {
  std::string_view number = text;
  Tolerance t;
  if (!number.empty() && number.back() == '%') {
    t.relative = true;
    number.remove_suffix(1);
  }
  auto amount = ParseDouble(number);
  if (!amount || !std::isfinite(*amount) || *amount < 0)
    return Status::Invalid("--within '", text, "': expected how far from the best value a trial ",
                           "may be, in the metric's units (0.002) or as a percentage of it (0.2%)");
  t.amount = t.relative ? *amount / 100 : *amount;
  return t;
}

const storage::TrialRecord* CheapestWithin(const std::vector<const storage::TrialRecord*>& ranked,
                                           const std::map<int, TrialCost>& costs,
                                           const Tolerance& tolerance, bool maximize) {
  if (ranked.empty()) return nullptr;
  const double best = *ranked.front()->value;
  // A value exactly at the tolerance counts (0.865 is within 0.001 of 0.866, though in doubles
  // their difference is a hair more).
  const double slack = (tolerance.relative ? tolerance.amount * std::abs(best) : tolerance.amount) +
                       1e-9 * std::max(1.0, std::abs(best));
  auto cost_of = [&](const storage::TrialRecord* t) -> const TrialCost* {
    auto it = costs.find(t->number);
    return it == costs.end() ? nullptr : &it->second;
  };
  // GPU time is dearer than CPU time, whatever the seconds: GPU-seconds and CPU-seconds are not
  // one currency.
  auto cheaper = [](const TrialCost& a, const TrialCost& b) {
    if (a.gpu() != b.gpu()) return !a.gpu();
    return a.cost < b.cost;
  };
  const storage::TrialRecord* pick = ranked.front();
  const TrialCost* pick_cost = cost_of(pick);
  // `ranked` is best first, so of equal costs the first met is the better (or earlier) trial.
  for (const storage::TrialRecord* t : ranked) {
    const double worse_by = maximize ? best - *t->value : *t->value - best;
    if (worse_by > slack) break;
    const TrialCost* c = cost_of(t);
    if (c && (!pick_cost || cheaper(*c, *pick_cost))) {
      pick = t;
      pick_cost = c;
    }
  }
  return pick;
}

}  // namespace hyperpack::report
