// What trials cost and will cost (costs.h), and --within's tolerance (report.h).
#include "costs.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string_view>

#include "hyperpack/config_json.h"
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
  const double slack = Slack(tolerance, best);
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

std::optional<WithinChoice> ChooseWithin(const StudyView& view,
                                         const std::map<int, TrialCost>& costs,
                                         const Tolerance& tolerance) {
  const bool maximize = Maximize(view.study);
  std::vector<const storage::TrialRecord*> ranked = Ranked(view);
  if (ranked.empty()) return std::nullopt;
  const std::vector<study::BestChoice> means = MeansByConfiguration(view);
  if (means.empty() || means.front().runs < 2) {
    const storage::TrialRecord* pick = CheapestWithin(ranked, costs, tolerance, maximize);
    return WithinChoice{pick, *pick->value, 1, ranked.front(), *ranked.front()->value, 1};
  }
  // Each re-run configuration stands as its first run, valued at its mean, costed as that run.
  std::map<int, const storage::TrialRecord*> by_number;
  for (const storage::TrialRecord* t : ranked) by_number[t->number] = t;
  std::vector<storage::TrialRecord> stand_ins;
  for (const study::BestChoice& m : means) {
    stand_ins.push_back(*by_number.at(m.trial));
    stand_ins.back().value = m.value;
  }
  std::vector<const storage::TrialRecord*> by_mean;
  for (const storage::TrialRecord& t : stand_ins) by_mean.push_back(&t);
  const storage::TrialRecord* pick = CheapestWithin(by_mean, costs, tolerance, maximize);
  const size_t i = static_cast<size_t>(pick - stand_ins.data());
  return WithinChoice{by_number.at(pick->number),        means[i].value,      means[i].runs,
                      by_number.at(means.front().trial), means.front().value, means.front().runs};
}

namespace {
// As the page's importance fit (kImportanceTrials): enough for a model, cheap to fit at each call.
constexpr size_t kCostTrials = 200;
}  // namespace

std::map<int, tuner::CostPrediction> PredictedCosts(const study::StudySpec& spec,
                                                    const std::vector<storage::TrialRecord>& trials,
                                                    const std::map<int, TrialCost>& costs,
                                                    bool* gpu_seconds) {
  std::map<int, tuner::CostPrediction> out;
  int gpu = 0, cpu = 0;
  for (const auto& [number, c] : costs) (c.gpu() ? gpu : cpu)++;
  const bool gpu_kind = gpu > cpu;
  *gpu_seconds = gpu_kind;
  std::vector<Config> configs;
  std::vector<double> seconds;
  std::vector<int> fitted;  // the trial of each fitted cost
  std::vector<std::pair<int, Config>> all;
  for (const storage::TrialRecord& t : trials) {
    all.emplace_back(t.number, t.params);
    auto c = costs.find(t.number);
    if (t.state != storage::TrialState::kCompleted || c == costs.end() ||
        c->second.gpu() != gpu_kind || !(c->second.cost > 0))
      continue;
    configs.push_back(t.params);
    seconds.push_back(c->second.cost);
    fitted.push_back(t.number);
  }
  // The fit is cubic in its points: the newest kCostTrials (trials come in number order).
  if (configs.size() > kCostTrials) {
    const auto drop = static_cast<std::ptrdiff_t>(configs.size() - kCostTrials);
    configs.erase(configs.begin(), configs.begin() + drop);
    seconds.erase(seconds.begin(), seconds.begin() + drop);
    fitted.erase(fitted.begin(), fitted.begin() + drop);
  }
  Result<tuner::CostModel> model = tuner::CostModel::Fit(spec.space, configs, seconds);
  if (!model.ok()) return out;
  std::vector<Config> to_predict;
  for (const auto& [number, config] : all) to_predict.push_back(config);
  const std::vector<tuner::CostPrediction> predicted = model->PredictMany(to_predict);
  for (size_t i = 0; i < all.size(); ++i) out[all[i].first] = predicted[i];
  // A trial the model was fitted on is predicted as if it had not run.
  const std::vector<tuner::CostPrediction> loo = model->LeaveOneOut();
  for (size_t i = 0; i < fitted.size(); ++i) out[fitted[i]] = loo[i];
  return out;
}

}  // namespace hyperpack::report
