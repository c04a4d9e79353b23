#include "hyperpack/tuner/pruner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "hyperpack/text.h"

namespace hyperpack::tuner {
namespace {

constexpr double kEps = 1e-9;

class NonePruner : public Pruner {
 public:
  explicit NonePruner(double max) : max_(max) {}
  double Begin(int) override { return max_; }
  PrunerDecision Report(int, double, double) override { return {}; }
  void End(int, bool) override {}
  std::optional<Promotion> NextPromotion() override { return std::nullopt; }
  std::vector<double> Rungs() const override { return {max_}; }

 private:
  double max_;
};

class MedianPruner : public Pruner {
 public:
  explicit MedianPruner(const PrunerOptions& o) : o_(o) {}
  double Begin(int) override { return o_.max_resource; }
  std::optional<Promotion> NextPromotion() override { return std::nullopt; }
  std::vector<double> Rungs() const override { return {o_.max_resource}; }

  PrunerDecision Report(int trial, double step, double value) override {
    curves_[trial][step] = value;
    if (static_cast<int>(completed_.size()) < o_.startup_trials || step < o_.warmup_steps)
      return {};
    // A report at the full resource is the trial's last: stopping it then saves nothing and
    // would record a fully trained trial as pruned.
    if (o_.max_resource > 0 && step + kEps >= o_.max_resource) return {};
    // Each completed trial's value at this step (its latest report at or before it).
    std::vector<double> others;
    for (int t : completed_) {
      const auto& c = curves_[t];
      auto it = c.upper_bound(step + kEps);
      if (it == c.begin()) continue;
      others.push_back(std::prev(it)->second);
    }
    if (others.empty()) return {};
    std::sort(others.begin(), others.end());
    size_t n = others.size();
    double median = n % 2 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
    double best = value;
    for (const auto& [s, v] : curves_[trial])
      if (s <= step + kEps && Better(v, best)) best = v;
    if (!Better(median, best)) return {};
    return {PrunerDecision::Kind::kStop,
            StrCat("median: best ", FormatShort(best, 5), " at step ", FormatShort(step, 6),
                   " is worse than the median ", FormatShort(median, 5), " of ", n,
                   " completed trials"),
            std::nullopt};
  }

  void End(int trial, bool completed) override {
    if (completed) completed_.insert(trial);
  }

 private:
  bool Better(double a, double b) const { return o_.maximize ? a > b : a < b; }

  PrunerOptions o_;
  std::map<int, std::map<double, double>> curves_;
  std::set<int> completed_;
};

// ASHA with one or more brackets (Hyperband's asynchronous form).
class AshaPruner : public Pruner {
 public:
  AshaPruner(const PrunerOptions& o, int brackets)
      : o_(o), promote_(o.mode == PrunerMode::kPromote) {
    for (int s = 0; s < brackets; ++s) {
      Bracket b;
      for (double r = o.min_resource * std::pow(o.reduction_factor, s);
           r < o.max_resource * (1 - kEps); r *= o.reduction_factor)
        b.rungs.push_back(r);
      b.rungs.push_back(o.max_resource);
      b.recorded.resize(b.rungs.size());
      b.promoted.resize(b.rungs.size());
      brackets_.push_back(std::move(b));
    }
  }

  bool pauses() const override { return promote_; }
  std::vector<double> Rungs() const override { return brackets_[0].rungs; }

  double Begin(int trial) override {
    auto it = state_.find(trial);
    if (it == state_.end()) {
      State s;
      s.bracket = next_bracket_++ % static_cast<int>(brackets_.size());
      it = state_.emplace(trial, s).first;
    }
    const Bracket& b = brackets_[it->second.bracket];
    return Pauses(it->second) ? b.rungs[it->second.target] : o_.max_resource;
  }

  PrunerDecision Report(int trial, double resource, double value) override {
    State& s = state_[trial];
    Bracket& b = brackets_[s.bracket];
    const int top = static_cast<int>(b.rungs.size()) - 1;
    PrunerDecision decision;
    // Every rung the trial has now passed, lowest first.
    while (s.recorded + 1 <= top && resource + kEps >= b.rungs[s.recorded + 1]) {
      int k = ++s.recorded;
      b.recorded[k].push_back({value, trial});
      if (k == top) return {PrunerDecision::Kind::kContinue, "", b.rungs[k]};
      if (!Pauses(s)) {
        decision = Judge(b, k, trial, value, "");
        if (decision.kind == PrunerDecision::Kind::kStop) return decision;
        continue;
      }
      if (k >= s.target) {
        paused_.insert(trial);
        return {PrunerDecision::Kind::kPause,
                StrCat("asha: reached rung ", FormatShort(b.rungs[k], 6), " with ",
                       FormatShort(value, 5), "; paused until it ranks in the top 1/",
                       FormatShort(o_.reduction_factor, 3), " there"),
                b.rungs[k]};
      }
    }
    return decision;
  }

  PrunerDecision CannotPause(int trial) override {
    State& s = state_[trial];
    Bracket& b = brackets_[s.bracket];
    s.no_pause = true;
    paused_.erase(trial);
    if (s.recorded < 0 || s.recorded + 1 >= static_cast<int>(b.rungs.size())) return {};
    double mine = 0;
    for (const auto& [v, t] : b.recorded[s.recorded])
      if (t == trial) mine = v;
    return Judge(b, s.recorded, trial, mine, " (it cannot pause: no checkpoint)");
  }

  std::optional<Promotion> ForcePromotion() override {
    int best = -1, best_rung = -1;
    double best_value = 0;
    for (int t : paused_) {
      const State& s = state_[t];
      double v = 0;
      for (const auto& [value, trial] : brackets_[s.bracket].recorded[s.recorded])
        if (trial == t) v = value;
      double rung = brackets_[s.bracket].rungs[s.recorded];
      double top = best >= 0 ? brackets_[state_[best].bracket].rungs[best_rung] : -1;
      if (best < 0 || rung > top || (rung == top && Better(v, best_value))) {
        best = t;
        best_rung = s.recorded;
        best_value = v;
      }
    }
    if (best < 0) return std::nullopt;
    Promoted(best);
    const State& s = state_[best];
    return Promotion{best, brackets_[s.bracket].rungs[s.target]};
  }

  void Promoted(int trial) override {
    if (!paused_.count(trial)) return;
    State& s = state_[trial];
    brackets_[s.bracket].promoted[s.recorded].insert(trial);
    paused_.erase(trial);
    s.target = s.recorded + 1;
  }

  void End(int trial, bool) override { paused_.erase(trial); }

  std::optional<Promotion> NextPromotion() override {
    // Higher rungs first: finishing a good trial is worth more than starting a lower one.
    for (size_t bi = 0; bi < brackets_.size(); ++bi) {
      Bracket& b = brackets_[bi];
      for (int k = static_cast<int>(b.rungs.size()) - 2; k >= 0; --k) {
        auto sorted = b.recorded[k];
        std::sort(sorted.begin(), sorted.end(), [&](const auto& x, const auto& y) {
          return Better(x.first, y.first) || (x.first == y.first && x.second < y.second);
        });
        // floor(n / eta) with eta a real number (2.5 promotes 4 of 10, not 5).
        int allowed =
            static_cast<int>(static_cast<double>(sorted.size()) / o_.reduction_factor + kEps);
        for (int i = 0; i < allowed && i < static_cast<int>(sorted.size()); ++i) {
          int t = sorted[i].second;
          if (b.promoted[k].count(t) || !paused_.count(t) || state_[t].recorded != k) continue;
          b.promoted[k].insert(t);
          paused_.erase(t);
          state_[t].target = k + 1;
          return Promotion{t, b.rungs[k + 1]};
        }
      }
    }
    return std::nullopt;
  }

 private:
  struct Bracket {
    std::vector<double> rungs;
    std::vector<std::vector<std::pair<double, int>>> recorded;  // per rung: (value, trial)
    std::vector<std::set<int>> promoted;                        // per rung: promoted from it
  };
  struct State {
    int bracket = 0;
    int recorded = -1;      // the highest rung reached
    int target = 0;         // promote mode: the rung it trains to
    bool no_pause = false;  // promote mode, but the trial cannot pause: judged as in stop mode
  };

  bool Pauses(const State& s) const { return promote_ && !s.no_pause; }
  // Stop mode's rule at rung k: continue only in the top 1/eta so far.
  PrunerDecision Judge(const Bracket& b, int k, int trial, double value, const char* note) const {
    int rank = Rank(b, k, trial);
    int allowed = Allowed(b.recorded[k].size());
    if (rank < allowed) return {PrunerDecision::Kind::kContinue, "", b.rungs[k]};
    return {PrunerDecision::Kind::kStop,
            StrCat("asha: ", FormatShort(value, 5), " at rung ", FormatShort(b.rungs[k], 6),
                   " ranks ", rank + 1, " of ", b.recorded[k].size(), "; only the top ", allowed,
                   " continue", note),
            b.rungs[k]};
  }

  bool Better(double a, double b) const { return o_.maximize ? a > b : a < b; }
  // At least the best one continues.
  int Allowed(size_t n) const {
    return std::max(1, static_cast<int>(static_cast<double>(n) / o_.reduction_factor + kEps));
  }
  int Rank(const Bracket& b, int k, int trial) const {
    double mine = 0;
    for (const auto& [v, t] : b.recorded[k])
      if (t == trial) mine = v;
    int better = 0;
    for (const auto& [v, t] : b.recorded[k])
      if (t != trial && (Better(v, mine) || (v == mine && t < trial))) ++better;
    return better;
  }

  PrunerOptions o_;
  bool promote_;
  std::vector<Bracket> brackets_;
  std::map<int, State> state_;
  std::set<int> paused_;
  int next_bracket_ = 0;
};

}  // namespace

const char* PrunerAlgorithmName(PrunerAlgorithm algorithm) {
  switch (algorithm) {
    case PrunerAlgorithm::kNone:
      return "none";
    case PrunerAlgorithm::kMedian:
      return "median";
    case PrunerAlgorithm::kAsha:
      return "asha";
    case PrunerAlgorithm::kHyperband:
      return "hyperband";
  }
  return "?";
}

Result<PrunerAlgorithm> ParsePrunerAlgorithm(std::string_view name) {
  for (PrunerAlgorithm a : {PrunerAlgorithm::kNone, PrunerAlgorithm::kMedian,
                            PrunerAlgorithm::kAsha, PrunerAlgorithm::kHyperband})
    if (name == PrunerAlgorithmName(a)) return a;
  return Status::Invalid("unknown pruner '", name, "'; expected none, median, asha or hyperband");
}

const char* PrunerModeName(PrunerMode mode) {
  return mode == PrunerMode::kPromote ? "promote" : "stop";
}

Result<PrunerMode> ParsePrunerMode(std::string_view name) {
  for (PrunerMode m : {PrunerMode::kStop, PrunerMode::kPromote})
    if (name == PrunerModeName(m)) return m;
  return Status::Invalid("pruner mode '", name, "'; expected stop or promote");
}

Result<std::unique_ptr<Pruner>> MakePruner(const PrunerOptions& o) {
  if (o.algorithm == PrunerAlgorithm::kNone)
    return std::unique_ptr<Pruner>(new NonePruner(o.max_resource));
  if (o.algorithm == PrunerAlgorithm::kMedian) return std::unique_ptr<Pruner>(new MedianPruner(o));
  if (!(o.min_resource > 0) || !(o.max_resource > o.min_resource))
    return Status::Invalid("pruner resources: need 0 < min_resource < max_resource");
  if (!(o.reduction_factor > 1)) return Status::Invalid("reduction_factor must be > 1");
  int brackets = 1;
  if (o.algorithm == PrunerAlgorithm::kHyperband) {
    brackets =
        1 + static_cast<int>(std::floor(
                std::log(o.max_resource / o.min_resource) / std::log(o.reduction_factor) + kEps));
  }
  return std::unique_ptr<Pruner>(new AshaPruner(o, brackets));
}

}  // namespace hyperpack::tuner
