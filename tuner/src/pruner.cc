#include "hyperpack/tuner/pruner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "hyperpack/text.h"
#include "hyperpack/tuner/pareto.h"
#include "median.h"

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

// A least-squares line from x to y, and the standard error of a new point's y.
struct Line {
  size_t n = 0;
  double mx = 0, my = 0, slope = 0, sxx = 0, s = 0;
  double At(double x) const { return my + slope * (x - mx); }
  double Error(double x) const {
    return s * std::sqrt(1 + 1.0 / n + (sxx > kEps ? (x - mx) * (x - mx) / sxx : 0));
  }
};

Line LeastSquares(const std::vector<double>& xs, const std::vector<double>& ys,
                  const std::vector<bool>& use) {
  Line l;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!use[i]) continue;
    ++l.n;
    l.mx += xs[i];
    l.my += ys[i];
  }
  l.mx /= l.n;
  l.my /= l.n;
  double sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!use[i]) continue;
    l.sxx += (xs[i] - l.mx) * (xs[i] - l.mx);
    sxy += (xs[i] - l.mx) * (ys[i] - l.my);
  }
  l.slope = l.sxx > kEps ? sxy / l.sxx : 0;
  double rss = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    if (use[i]) rss += (ys[i] - l.At(xs[i])) * (ys[i] - l.At(xs[i]));
  // A floor: a line through the points exactly is no certainty.
  l.s = std::max(std::sqrt(rss / static_cast<double>(l.n - 2)), 1e-6 * (1 + std::abs(l.my)));
  return l;
}

// The points that ended more than three robust standard deviations (1.4826 x the median absolute
// residual) worse than a Theil-Sen line says (the median of the pairwise slopes, on an evenly
// thinned subset of at most kRobustPoints, and the median intercept): trials that diverged after
// the rung. Only worse: one that ended better than its rung promised is the evidence that the rung
// says little. None when that would leave fewer than half of the points, or fewer than `least`.
std::vector<bool> Inliers(const std::vector<double>& xs, const std::vector<double>& ys,
                          size_t least) {
  constexpr size_t kRobustPoints = 128;
  const size_t n = xs.size(), stride = (n + kRobustPoints - 1) / kRobustPoints;
  std::vector<bool> all(n, true);
  std::vector<double> slopes;
  for (size_t i = 0; i < n; i += stride)
    for (size_t j = i + stride; j < n; j += stride)
      if (std::abs(xs[j] - xs[i]) > kEps) slopes.push_back((ys[j] - ys[i]) / (xs[j] - xs[i]));
  const double slope = slopes.empty() ? 0 : MedianOf(std::move(slopes));
  std::vector<double> offsets(n), residuals(n);
  for (size_t i = 0; i < n; ++i) offsets[i] = ys[i] - slope * xs[i];
  const double intercept = MedianOf(offsets);
  for (size_t i = 0; i < n; ++i) residuals[i] = std::abs(offsets[i] - intercept);
  const double cutoff = 3 * 1.4826 * MedianOf(residuals);
  std::vector<bool> in(n);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    in[i] = offsets[i] - intercept <= cutoff;
    kept += in[i] ? 1 : 0;
  }
  return cutoff > kEps && kept >= std::max(least, (n + 1) / 2) ? in : all;
}

// Stops a trial at a rung when the completed trials forecast that it will not end better than the
// best of them (pruner.h). Values are kept in the minimised direction.
class ForecastPruner : public Pruner {
 public:
  explicit ForecastPruner(const PrunerOptions& o) : o_(o) {
    for (double r = o.min_resource; r < o.max_resource * (1 - kEps); r *= o.reduction_factor)
      rungs_.push_back(r);
  }
  double Begin(int) override { return o_.max_resource; }
  std::optional<Promotion> NextPromotion() override { return std::nullopt; }
  std::vector<double> Rungs() const override { return {o_.max_resource}; }

  PrunerDecision Report(int trial, double resource, double value) override {
    Curve& c = curves_[trial];
    c.values[resource] = o_.maximize ? -value : value;
    // The first report at or past the next rung is judged there (steps may skip a rung).
    size_t rung = c.judged;
    while (c.judged < rungs_.size() && rungs_[c.judged] <= resource + kEps) ++c.judged;
    if (c.judged == rung || resource + kEps >= o_.max_resource) return {};
    if (static_cast<int>(completed_.size()) < std::max(o_.startup_trials, kMinPoints))
      return JudgeAtStartup(c, c.judged - 1, resource);
    return Judge(c, rungs_[c.judged - 1], resource);
  }

  void End(int trial, bool completed) override {
    auto it = curves_.find(trial);
    if (completed && it != curves_.end() && !it->second.values.empty()) completed_.insert(trial);
  }

 private:
  struct Curve {
    std::map<double, double> values;  // by resource, minimised
    size_t judged = 0;                // rungs passed
  };
  static constexpr int kMinPoints = 3;     // a line and a residual
  static constexpr int kStartupPeers = 4;  // trials at a rung before its median stops one

  // The best value at or before `resource`; nullopt when none.
  static std::optional<double> BestBy(const Curve& c, double resource) {
    std::optional<double> best;
    for (const auto& [r, v] : c.values)
      if (r <= resource + kEps && (!best || v < *best)) best = v;
    return best;
  }

  // Before the line can be fitted: from the second rung on, a trial worse than the median of the
  // trials that have reached the rung (kStartupPeers at least, itself among them) stops. With
  // many trials at once the first ones would otherwise all train to the end before anything is
  // judged; the first rung, which ranks final values worst, is left alone.
  PrunerDecision JudgeAtStartup(const Curve& c, size_t rung, double resource) const {
    if (rung < 1) return {};
    std::vector<double> at;
    for (const auto& [t, other] : curves_) {
      if (other.judged <= rung) continue;
      std::optional<double> v = BestBy(other, &other == &c ? resource : rungs_[rung]);
      if (v && !std::isnan(*v)) at.push_back(*v);
    }
    if (static_cast<int>(at.size()) < kStartupPeers) return {};
    const double v = *BestBy(c, resource), median = MedianOf(at);
    if (!(v > median)) return {};
    auto shown = [&](double z) { return FormatShort(o_.maximize ? -z : z, 4); };
    return {PrunerDecision::Kind::kStop,
            StrCat("forecast, before ", std::max(o_.startup_trials, kMinPoints),
                   " trials have completed: ", shown(v), " at rung ", FormatShort(rungs_[rung], 6),
                   " is worse than the median, ", shown(median), ", of the ", at.size(),
                   " trials that reached it"),
            std::nullopt};
  }

  PrunerDecision Judge(const Curve& c, double rung, double resource) const {
    const double v = *BestBy(c, resource);
    std::vector<double> xs, ys;
    bool positive = v > 0;
    for (int t : completed_) {
      const Curve& done = curves_.at(t);
      std::optional<double> at = BestBy(done, resource);
      const double final = done.values.rbegin()->second;
      // A trial whose value was NaN (ranked worst, as infinity) is on no line.
      if (!at || !std::isfinite(*at) || !std::isfinite(final)) continue;
      xs.push_back(*at);
      ys.push_back(final);
      positive = positive && *at > 0 && final > 0;
    }
    const size_t n = xs.size();
    const size_t least = std::max<size_t>(o_.startup_trials, kMinPoints);
    if (n < least) return {};
    if (!(v > MedianOf(xs))) return {};  // the line is trusted only to stop the worse half
    auto t = [&](double z) { return positive ? std::log(z) : z; };
    std::transform(xs.begin(), xs.end(), xs.begin(), t);
    std::transform(ys.begin(), ys.end(), ys.begin(), t);
    const std::vector<bool> in = Inliers(xs, ys, least);
    const Line line = LeastSquares(xs, ys, in);
    const double best = *std::min_element(ys.begin(), ys.end());  // outliers' too
    const double x = t(v), forecast = line.At(x);
    const double chance = 0.5 * std::erfc((forecast - best) / (line.Error(x) * std::sqrt(2.0)));
    if (!(chance < o_.probability)) return {};
    auto shown = [&](double z) {
      const double raw = positive ? std::exp(z) : z;
      return FormatShort(o_.maximize ? -raw : raw, 4);
    };
    const std::string aside =
        line.n < n ? StrCat(" (", n - line.n, " off the line set aside)") : std::string();
    return {PrunerDecision::Kind::kStop,
            StrCat("forecast: ", shown(x), " at rung ", FormatShort(rung, 6),
                   " predicts a final value of ", shown(forecast), " from ", n, " completed trials",
                   aside, "; the chance of ending better than the best, ", shown(best), ", is ",
                   FormatShort(100 * chance, 2), "% < ", FormatShort(100 * o_.probability, 3), "%"),
            std::nullopt};
  }

  PrunerOptions o_;
  std::vector<double> rungs_;  // judged at: min_resource x eta^k below max_resource
  std::map<int, Curve> curves_;
  std::set<int> completed_;
};

// ASHA with one or more brackets (Hyperband's asynchronous form). A rung's trials are ranked by
// their value, or with several objectives by non-dominated sorting, then by crowding distance
// within a front (most isolated first), then by trial number.
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
    return Record(trial, resource, Entry{{o_.maximize ? -value : value}, trial, {value}});
  }

  PrunerDecision ReportObjectives(int trial, double resource,
                                  std::span<const double> values) override {
    if (o_.objectives.size() < 2) return Report(trial, resource, values.empty() ? 0 : values[0]);
    Entry e{{}, trial, std::vector<double>(values.begin(), values.end())};
    bool missing = values.size() < o_.objectives.size();
    for (size_t k = 0; k < o_.objectives.size() && !missing; ++k) {
      missing = std::isnan(values[k]);
      e.key.push_back(o_.objectives[k] ? -values[k] : values[k]);
    }
    // A trial that has not reported every objective cannot be placed on a front: it ranks last.
    if (missing) e.key.assign(o_.objectives.size(), std::numeric_limits<double>::infinity());
    return Record(trial, resource, std::move(e));
  }

  PrunerDecision CannotPause(int trial) override {
    State& s = state_[trial];
    Bracket& b = brackets_[s.bracket];
    s.no_pause = true;
    paused_.erase(trial);
    if (s.recorded < 0 || s.recorded + 1 >= static_cast<int>(b.rungs.size())) return {};
    return Judge(b, s.recorded, trial, " (it cannot pause: no checkpoint)");
  }

  std::optional<Promotion> ForcePromotion() override {
    // The paused trials at the highest rung, and the best placed of them there.
    double top = -1;
    std::vector<Entry> at_top;
    for (int t : paused_) {
      const State& s = state_[t];
      const double rung = brackets_[s.bracket].rungs[s.recorded];
      if (rung < top) continue;
      if (rung > top) at_top.clear();
      top = rung;
      at_top.push_back(EntryOf(brackets_[s.bracket], s.recorded, t));
    }
    if (at_top.empty()) return std::nullopt;
    const int best = at_top[Order(at_top).front()].trial;
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
        const std::vector<int> order = Order(b.recorded[k]);
        // floor(n / eta) with eta a real number (2.5 promotes 4 of 10, not 5).
        int allowed =
            static_cast<int>(static_cast<double>(order.size()) / o_.reduction_factor + kEps);
        for (int i = 0; i < allowed && i < static_cast<int>(order.size()); ++i) {
          int t = b.recorded[k][order[i]].trial;
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
  // A trial at a rung: what it is ranked by (every objective minimised), and what it reported.
  struct Entry {
    std::vector<double> key;
    int trial;
    std::vector<double> reported;
  };
  struct Bracket {
    std::vector<double> rungs;
    std::vector<std::vector<Entry>> recorded;  // per rung, in the order reached
    std::vector<std::set<int>> promoted;       // per rung: promoted from it
  };
  struct State {
    int bracket = 0;
    int recorded = -1;      // the highest rung reached
    int target = 0;         // promote mode: the rung it trains to
    bool no_pause = false;  // promote mode, but the trial cannot pause: judged as in stop mode
  };

  PrunerDecision Record(int trial, double resource, Entry entry) {
    State& s = state_[trial];
    Bracket& b = brackets_[s.bracket];
    const int top = static_cast<int>(b.rungs.size()) - 1;
    PrunerDecision decision;
    // Every rung the trial has now passed, lowest first.
    while (s.recorded + 1 <= top && resource + kEps >= b.rungs[s.recorded + 1]) {
      int k = ++s.recorded;
      b.recorded[k].push_back(entry);
      if (k == top) return {PrunerDecision::Kind::kContinue, "", b.rungs[k]};
      if (!Pauses(s)) {
        decision = Judge(b, k, trial, "");
        if (decision.kind == PrunerDecision::Kind::kStop) return decision;
        continue;
      }
      if (k >= s.target) {
        paused_.insert(trial);
        return {PrunerDecision::Kind::kPause,
                StrCat("asha: reached rung ", FormatShort(b.rungs[k], 6), " with ", Shown(entry),
                       "; paused until it ranks in the top 1/", FormatShort(o_.reduction_factor, 3),
                       " there"),
                b.rungs[k]};
      }
    }
    return decision;
  }

  bool Pauses(const State& s) const { return promote_ && !s.no_pause; }

  // Stop mode's rule at rung k: continue only in the top 1/eta so far.
  PrunerDecision Judge(const Bracket& b, int k, int trial, const char* note) const {
    const std::vector<int> order = Order(b.recorded[k]);
    int rank = 0;
    while (b.recorded[k][order[rank]].trial != trial) ++rank;
    int allowed = Allowed(order.size());
    if (rank < allowed) return {PrunerDecision::Kind::kContinue, "", b.rungs[k]};
    const Entry& mine = b.recorded[k][order[rank]];
    return {PrunerDecision::Kind::kStop,
            StrCat("asha: ", Shown(mine), " at rung ", FormatShort(b.rungs[k], 6),
                   FrontNote(b, k, mine), " ranks ", rank + 1, " of ", order.size(),
                   "; only the top ", allowed, " continue", note),
            b.rungs[k]};
  }

  // The value, or with several objectives the values in parentheses.
  static std::string Shown(const Entry& e) {
    if (e.reported.size() == 1) return FormatShort(e.reported[0], 5);
    std::vector<std::string> parts;
    for (double v : e.reported) parts.push_back(FormatShort(v, 5));
    return StrCat("(", Join(parts, ", "), ")");
  }

  // With several objectives, the non-dominated front the entry is in at its rung.
  std::string FrontNote(const Bracket& b, int k, const Entry& e) const {
    if (e.key.size() < 2) return "";
    std::vector<ObjectiveVector> points;
    for (const Entry& x : b.recorded[k]) points.push_back(x.key);
    const std::vector<std::vector<int>> fronts = NonDominatedSort(points);
    for (size_t f = 0; f < fronts.size(); ++f)
      for (int i : fronts[f])
        if (b.recorded[k][i].trial == e.trial)
          return StrCat(" is in non-dominated front ", f + 1, " of ", fronts.size(), ",");
    return "";
  }

  // Positions into `entries`, best first: by value (one objective), or by front then crowding
  // distance (several); ties by trial number.
  static std::vector<int> Order(const std::vector<Entry>& entries) {
    std::vector<int> order(entries.size());
    std::iota(order.begin(), order.end(), 0);
    if (entries.empty() || entries[0].key.size() < 2) {
      std::sort(order.begin(), order.end(), [&](int x, int y) {
        const Entry &a = entries[x], &b = entries[y];
        return a.key[0] < b.key[0] || (a.key[0] == b.key[0] && a.trial < b.trial);
      });
      return order;
    }
    std::vector<ObjectiveVector> points;
    for (const Entry& e : entries) points.push_back(e.key);
    order.clear();
    for (const std::vector<int>& front : NonDominatedSort(points)) {
      const std::vector<double> crowding = CrowdingDistance(points, front);
      std::vector<int> members(front.size());
      std::iota(members.begin(), members.end(), 0);
      std::sort(members.begin(), members.end(), [&](int x, int y) {
        return crowding[x] > crowding[y] ||
               (crowding[x] == crowding[y] && entries[front[x]].trial < entries[front[y]].trial);
      });
      for (int m : members) order.push_back(front[m]);
    }
    return order;
  }

  // Trial t's entry at rung k of bracket b.
  static Entry EntryOf(const Bracket& b, int k, int t) {
    for (const Entry& e : b.recorded[k])
      if (e.trial == t) return e;
    return Entry{{0}, t, {0}};
  }

  // At least the best one continues.
  int Allowed(size_t n) const {
    return std::max(1, static_cast<int>(static_cast<double>(n) / o_.reduction_factor + kEps));
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
    case PrunerAlgorithm::kForecast:
      return "forecast";
  }
  return "?";
}

Result<PrunerAlgorithm> ParsePrunerAlgorithm(std::string_view name) {
  for (PrunerAlgorithm a :
       {PrunerAlgorithm::kNone, PrunerAlgorithm::kMedian, PrunerAlgorithm::kAsha,
        PrunerAlgorithm::kHyperband, PrunerAlgorithm::kForecast})
    if (name == PrunerAlgorithmName(a)) return a;
  return Status::Invalid("unknown pruner '", name,
                         "'; expected none, median, asha, hyperband or forecast");
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
  if (o.algorithm == PrunerAlgorithm::kForecast) {
    if (!(o.probability > 0 && o.probability < 1))
      return Status::Invalid("forecast probability must be in (0, 1)");
    return std::unique_ptr<Pruner>(new ForecastPruner(o));
  }
  int brackets = 1;
  if (o.algorithm == PrunerAlgorithm::kHyperband) {
    brackets =
        1 + static_cast<int>(std::floor(
                std::log(o.max_resource / o.min_resource) / std::log(o.reduction_factor) + kEps));
  }
  return std::unique_ptr<Pruner>(new AshaPruner(o, brackets));
}

}  // namespace hyperpack::tuner
