#include "page_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "hyperpack/config_json.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/importance.h"
#include "hyperpack/tuner/pareto.h"
#include "hyperpack/tuner/pruner.h"
#include "hyperpack/tuner/tuner.h"
#include "json_values.h"

namespace hyperpack::report {
namespace {

using nlohmann::json;
using storage::JournalEntry;
using storage::JournalKind;
using storage::TrialRecord;
using storage::TrialState;

// The GP behind the importance is fitted on at most this many trials (its cost grows as n^3).
constexpr int kImportanceTrials = 200;

json StudyJson(const StudyView& in) {
  json s = {{"name", in.study.name},
            {"metric", in.study.metric},
            {"direction", DirectionName(in.study.direction)},
            {"created", in.study.created},
            {"tuner", nullptr},
            {"pruner", nullptr},
            {"resource", nullptr}};
  if (in.spec) {
    s["tuner"] = tuner::TunerAlgorithmName(in.spec->tuner.algorithm);
    s["pruner"] = tuner::PrunerAlgorithmName(in.spec->pruner.algorithm);
    if (in.spec->pruner.algorithm != tuner::PrunerAlgorithm::kNone)
      s["resource"] = study::ResourceName(in.spec->pruner.resource);
  }
  return s;
}

json SpaceJson(const StudyView& in) {
  json out = json::array();
  if (!in.spec) return out;
  for (const ParamSpec& p : in.spec->space.params()) {
    if (p.type == ParamType::kFixed) continue;
    json j = {{"name", p.name}, {"type", ParamTypeName(p.type)}, {"log", p.log}};
    if (p.type == ParamType::kCategorical) {
      j["choices"] = json::array();
      for (const Value& v : p.values) j["choices"].push_back(ValueAsJson<json>(v));
    } else {
      j["low"] = p.low;
      j["high"] = p.high;
    }
    out.push_back(std::move(j));
  }
  return out;
}

json TrialsJson(const StudyView& in, const Segments& segments) {
  const std::map<int, TrialCost> costs = TrialCosts(in, segments);
  const std::map<int, int> again = FinalistRepeats(in);
  json out = json::array();
  for (const TrialRecord& t : in.trials) {
    json params = json::parse(ConfigToJson(t.params, in.space()));
    auto it = costs.find(t.number);
    const TrialCost* c = it == costs.end() ? nullptr : &it->second;
    const int gpus = c ? c->gpus : 0, cpus = c ? c->cpus : 0;
    const std::optional<double> duration = c ? std::optional<double>(c->seconds) : std::nullopt;
    const std::optional<double> cost = c ? std::optional<double>(c->cost) : std::nullopt;
    out.push_back({{"number", t.number},
                   {"state", storage::TrialStateName(t.state)},
                   {"value", FiniteOrNull<json>(t.value)},
                   {"params", std::move(params)},
                   {"started", FiniteOrNull<json>(t.started)},
                   {"ended", FiniteOrNull<json>(t.ended)},
                   {"duration", FiniteOrNull<json>(duration)},
                   {"host", t.host},
                   {"gpus", gpus},
                   {"cpus", cpus},
                   {"cost", FiniteOrNull<json>(cost)},
                   {"cost_unit", gpus > 0 ? "GPU-s" : "CPU-s"},
                   {"error", t.error},
                   {"log", t.log_path},
                   {"attempt", t.attempt},
                   {"retry_of", t.retry_of ? json(*t.retry_of) : json(nullptr)}});
    if (in.spec && in.spec->KeepsValues()) {
      out.back()["values"] = t.values;
      out.back()["feasible"] = study::MeetsConstraints(*in.spec, t.values);
    }
    if (auto it = again.find(t.number); it != again.end()) out.back()["finalist_of"] = it->second;
  }
  return out;
}

// The study's best as `hyperpack best` names it: constraints met, and with finalists the
// configuration with the best mean of its runs. Null with several objectives or before any.
json BestJson(const StudyView& in) {
  if (in.spec && in.spec->MultiObjective()) return nullptr;
  const std::optional<BestTrial> best = BestOf(in);
  if (!best) return nullptr;
  json out = {{"trial", best->trial.number}, {"value", best->value}, {"runs", best->runs}};
  if (best->by_model) out["by_model"] = true;  // budget.rerun_top: the model's pick
  return out;
}

// Minimised copies of a trial's objective values (a maximised one negated), as pareto.h counts.
std::optional<tuner::ObjectiveVector> Minimised(const study::StudySpec& spec,
                                                const TrialRecord& t) {
  std::optional<std::vector<double>> v = ObjectiveValues(spec, t);
  if (!v) return std::nullopt;
  for (size_t k = 0; k < v->size(); ++k)
    if (spec.objectives[k].direction == Direction::kMaximize) (*v)[k] = -(*v)[k];
  return v;
}

// Several objectives: the objectives and constraints, the Pareto set's members, and the
// hypervolume of the feasible front after each completed trial, in trial order, against a
// reference 10% of each objective's range beyond its worst feasible value (in the objectives' own
// directions). Null for a study with one objective.
json FrontJson(const StudyView& in) {
  if (!in.spec || !in.spec->MultiObjective()) return nullptr;
  const study::StudySpec& spec = *in.spec;
  json out = {{"objectives", json::array()}, {"members", json::array()}};
  for (const study::Objective& o : spec.objectives)
    out["objectives"].push_back({{"metric", o.metric}, {"direction", DirectionName(o.direction)}});
  for (const TrialRecord* t : ParetoSet(in)) out["members"].push_back(t->number);
  std::vector<std::pair<int, tuner::ObjectiveVector>> feasible;
  for (const TrialRecord& t : in.trials) {
    if (t.state != TrialState::kCompleted || !study::MeetsConstraints(spec, t.values)) continue;
    if (auto v = Minimised(spec, t)) feasible.emplace_back(t.number, std::move(*v));
  }
  std::sort(feasible.begin(), feasible.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  out["hypervolume"] = json::array();
  if (feasible.empty()) return out;
  const size_t m = spec.objectives.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> lo(m, inf), hi(m, -inf), ref(m);
  for (const auto& [n, v] : feasible)
    for (size_t k = 0; k < m; ++k) {
      lo[k] = std::min(lo[k], v[k]);
      hi[k] = std::max(hi[k], v[k]);
    }
  for (size_t k = 0; k < m; ++k) {
    const double range = hi[k] > lo[k] ? hi[k] - lo[k] : std::max(1.0, std::fabs(hi[k]));
    ref[k] = hi[k] + 0.1 * range;
  }
  json shown = json::array();
  for (size_t k = 0; k < m; ++k)
    shown.push_back(spec.objectives[k].direction == Direction::kMaximize ? -ref[k] : ref[k]);
  out["reference"] = std::move(shown);
  // The front so far: a point that one of it dominates leaves the hypervolume as it was.
  std::vector<tuner::ObjectiveVector> front;
  double hv = 0;
  for (const auto& [n, v] : feasible) {
    const bool dominated = std::any_of(front.begin(), front.end(), [&](const auto& f) {
      return f == v || tuner::Dominates(f, v);
    });
    if (!dominated) {
      std::erase_if(front, [&](const auto& f) { return tuner::Dominates(v, f); });
      front.push_back(v);
      hv = tuner::Hypervolume(front, ref);
    }
    out["hypervolume"].push_back({{"trial", n}, {"value", hv}});
  }
  return out;
}

// A finalist's curve, from its stored metric points (and its re-runs'), as the controller measured
// its resource: the step where the pruner counts steps, else the epoch the line gave, else the
// line's place among the objective's points.
json FinalistPoints(const StudyView& in, int root, const std::map<int, int>& root_of) {
  const bool by_step = in.spec && in.spec->pruner.resource == study::PrunerResource::kStep;
  json points = json::array();
  int ordinal = 0;
  for (const auto& [n, rows] : in.finalist_metrics) {
    if (auto r = root_of.find(n); r == root_of.end() || r->second != root) continue;
    std::map<int64_t, double> epoch_at;
    for (const storage::MetricPoint& p : rows)
      if (p.name == env::kEpochMetric) epoch_at[p.step] = p.value;
    for (const storage::MetricPoint& p : rows) {
      if (p.name != in.study.metric || !std::isfinite(p.value)) continue;
      ++ordinal;
      auto e = epoch_at.find(p.step);
      const double x = by_step               ? static_cast<double>(p.step)
                       : e != epoch_at.end() ? e->second
                                             : static_cast<double>(ordinal);
      points.push_back({x, p.value});
    }
  }
  return points;
}

// The pruner's view, one curve per root trial (a re-run continues its first attempt's curve),
// marked where it was promoted and where its latest attempt was pruned or paused; and each
// finalist's curve, which the pruner never judged, with the trial whose configuration it repeats.
json CurvesJson(const StudyView& in) {
  std::map<int, int> root_of, latest;  // trial -> root; root -> its latest attempt
  std::map<int, const TrialRecord*> by_number;
  for (const TrialRecord& t : in.trials) {
    by_number[t.number] = &t;
    auto parent = t.retry_of ? root_of.find(*t.retry_of) : root_of.end();
    const int root = parent != root_of.end() ? parent->second : t.number;
    root_of[t.number] = root;
    latest[root] = std::max(latest[root], t.number);
  }
  struct Curve {
    json points = json::array();
    json marks = json::array();
    std::optional<double> last;
  };
  std::map<int, Curve> curves;
  for (const JournalEntry& e : in.journal) {
    if (e.kind == JournalKind::kReport && std::isfinite(e.value)) {
      Curve& c = curves[e.trial];
      c.points.push_back({e.resource, e.value});
      c.last = e.resource;
    } else if (e.kind == JournalKind::kPromoted) {
      Curve& c = curves[e.trial];
      if (c.last) c.marks.push_back({{"resource", *c.last}, {"kind", "promoted"}});
    }
  }
  json out = json::array();
  for (auto& [root, c] : curves) {
    if (c.points.empty()) continue;
    if (auto it = latest.find(root); it != latest.end() && c.last) {
      const TrialState state = by_number[it->second]->state;
      if (state == TrialState::kPruned || state == TrialState::kPaused) {
        c.marks.push_back(
            {{"resource", *c.last}, {"kind", state == TrialState::kPruned ? "pruned" : "paused"}});
      }
    }
    out.push_back(
        {{"trial", root}, {"points", std::move(c.points)}, {"marks", std::move(c.marks)}});
  }
  const std::map<int, int> again = FinalistRepeats(in);
  for (const auto& [root, of] : again) {
    // A re-run after an interruption joins its finalist's curve.
    if (auto r = root_of.find(root); r != root_of.end() && r->second != root) continue;
    if (curves.count(root)) continue;
    json points = FinalistPoints(in, root, root_of);
    if (points.empty()) continue;
    out.push_back({{"trial", root},
                   {"points", std::move(points)},
                   {"marks", json::array()},
                   {"finalist_of", of}});
  }
  return out;
}

bool Scored(const TrialRecord& t) {
  return t.state == TrialState::kCompleted && t.value && std::isfinite(*t.value);
}

// {"method", "values"}, or null with the reason in data["importance_note"].
json ImportanceJson(const StudyView& in, json* note) {
  if (!in.spec) {
    *note = "the stored study file no longer parses";
    return nullptr;
  }
  std::vector<Config> configs;
  std::vector<double> values;
  for (const TrialRecord& t : in.trials) {
    if (!Scored(t)) continue;
    configs.push_back(t.params);
    values.push_back(*t.value);
  }
  const int scored = static_cast<int>(values.size());
  if (scored > kImportanceTrials) {
    // Evenly spaced in trial order: early exploration and late refinement both stay in.
    std::vector<Config> some_configs;
    std::vector<double> some_values;
    for (int k = 0; k < kImportanceTrials; ++k) {
      const size_t i = static_cast<size_t>(k) * scored / kImportanceTrials;
      some_configs.push_back(configs[i]);
      some_values.push_back(values[i]);
    }
    configs = std::move(some_configs);
    values = std::move(some_values);
  }
  tuner::ImportanceOptions options;
  options.seed = in.study.seed;
  Result<std::vector<tuner::ParamImportance>> r =
      tuner::ParameterImportance(in.spec->space, configs, values, options);
  if (!r.ok()) {
    *note = r.status().message();
    return nullptr;
  }
  json items = json::array();
  for (const tuner::ParamImportance& i : *r)
    items.push_back({{"param", i.param}, {"importance", i.importance}});
  const std::string on = scored > kImportanceTrials
                             ? StrCat(kImportanceTrials, " of the ", scored, " completed trials")
                             : StrCat("the ", scored, " completed trials");
  return {{"method",
           StrCat("Inverse length scales of a Gaussian process (Matern 5/2, one length scale per "
                  "dimension) fitted to ",
                  on,
                  ", normalised to sum to 1: the objective changes quickly along a parameter that "
                  "scores high. A sensitivity of the model, not a variance decomposition.")},
          {"values", std::move(items)}};
}

json TimelineJson(const Timeline& timeline, const StudyView& in) {
  std::map<int, TrialState> state;
  for (const TrialRecord& t : in.trials) state[t.number] = t.state;
  json lanes = json::array(), bars = json::array();
  for (const TimelineLane& l : timeline.lanes)
    lanes.push_back({{"id", l.id}, {"host", l.host}, {"label", l.label}});
  for (const TimelineBar& b : timeline.bars) {
    bars.push_back({{"lane", b.lane},
                    {"trial", b.trial},
                    {"start", b.start},
                    {"end", b.end},
                    {"state", storage::TrialStateName(state[b.trial])}});
  }
  return {{"lanes", std::move(lanes)}, {"bars", std::move(bars)}};
}

json EventsJson(const StudyView& in) {
  json out = json::array();
  const size_t from = in.events.size() > static_cast<size_t>(kPageEvents)
                          ? in.events.size() - static_cast<size_t>(kPageEvents)
                          : 0;
  for (size_t i = from; i < in.events.size(); ++i) {
    const storage::EventRecord& e = in.events[i];
    out.push_back({{"time", e.time},
                   {"trial", e.trial ? json(*e.trial) : json(nullptr)},
                   {"kind", e.kind},
                   {"message", e.message}});
  }
  return out;
}

// One run segment of one rank, for the timeline.
struct Use {
  double start, end;
  int trial;
  std::string host;
  std::vector<int> gpus;
  int cpus;
  bool shared;  // a share of gpus[0]
};
struct TimelineUses {
  std::vector<Use> uses;                                        // by start
  std::vector<std::string> hosts;                               // in order of first use
  std::map<std::string, std::set<int>> gpus_of, whole_gpus_of;  // every GPU; those used whole
};

TimelineUses CollectUses(const StudyView& in) {
  const Segments segments = RunSegments(in);
  TimelineUses out;
  for (const TrialRecord& t : in.trials) {
    auto it = segments.find(t.number);
    if (it == segments.end()) continue;
    std::vector<storage::RankRecord> ranks = t.placement;
    if (ranks.empty()) ranks.push_back({t.host.empty() ? "local" : t.host, {}, 1});
    for (const storage::RankRecord& r : ranks) {
      if (std::find(out.hosts.begin(), out.hosts.end(), r.host) == out.hosts.end())
        out.hosts.push_back(r.host);
      out.gpus_of[r.host].insert(r.gpus.begin(), r.gpus.end());
      const bool shared = r.gpu_share > 0 && !r.gpus.empty();
      if (!shared) out.whole_gpus_of[r.host].insert(r.gpus.begin(), r.gpus.end());
      // A GPU rank is drawn on its GPUs; its CPU slots are not a lane of their own.
      const int cpus = r.gpus.empty() ? std::max(r.cpus, 1) : 0;
      for (const auto& [start, end] : it->second)
        out.uses.push_back({start, end, t.number, r.host, r.gpus, cpus, shared});
    }
  }
  std::stable_sort(out.uses.begin(), out.uses.end(),
                   [](const Use& a, const Use& b) { return a.start < b.start; });
  return out;
}

}  // namespace

Timeline BuildTimeline(const StudyView& in) {
  TimelineUses c = CollectUses(in);
  Timeline out;
  // Lanes that trials take in turn, the first free one: a host's CPU slots ("host/cpu"), and the
  // shares of one GPU ("host/gpu0/share"), so that trials packed on a GPU do not overlap.
  std::map<std::string, std::vector<double>> free_at;  // lane prefix -> when each lane is free
  auto take = [&](const std::string& prefix, const Use& u) {
    std::vector<double>& lanes = free_at[prefix];
    size_t s = 0;
    while (s < lanes.size() && lanes[s] > u.start) ++s;
    if (s == lanes.size()) lanes.push_back(0);
    lanes[s] = u.end;
    out.bars.push_back({StrCat(prefix, s), u.trial, u.start, u.end});
  };
  for (const Use& u : c.uses) {
    if (u.shared) {
      take(StrCat(u.host, "/gpu", u.gpus[0], "/share"), u);
    } else {
      for (int g : u.gpus) out.bars.push_back({StrCat(u.host, "/gpu", g), u.trial, u.start, u.end});
    }
    for (int n = 0; n < u.cpus; ++n) take(u.host + "/cpu", u);
  }
  for (const std::string& host : c.hosts) {
    for (int g : c.gpus_of[host]) {
      if (c.whole_gpus_of[host].count(g))
        out.lanes.push_back({StrCat(host, "/gpu", g), host, StrCat(host, " gpu ", g)});
      const std::string shares = StrCat(host, "/gpu", g, "/share");
      for (size_t s = 0; s < free_at[shares].size(); ++s)
        out.lanes.push_back({StrCat(shares, s), host, StrCat(host, " gpu ", g, " share ", s + 1)});
    }
    for (size_t s = 0; s < free_at[host + "/cpu"].size(); ++s)
      out.lanes.push_back({StrCat(host, "/cpu", s), host, StrCat(host, " cpu ", s)});
  }
  return out;
}

int ScoredTrials(const StudyView& in) {
  return static_cast<int>(std::count_if(in.trials.begin(), in.trials.end(), Scored));
}

nlohmann::json PageImportance(const StudyView& in) {
  json note = nullptr;
  json importance = ImportanceJson(in, &note);
  return {{"importance", std::move(importance)}, {"importance_note", std::move(note)}};
}

nlohmann::json PageData(const StudyView& in) {
  const Segments segments = RunSegments(in);
  const json importance = in.importance ? *in.importance : PageImportance(in);
  return {{"generated", in.now},
          {"live", in.live},
          {"study", StudyJson(in)},
          {"params", SpaceJson(in)},
          {"trials", TrialsJson(in, segments)},
          {"best", BestJson(in)},
          {"curves", CurvesJson(in)},
          {"importance", importance.value("importance", json())},
          {"importance_note", importance.value("importance_note", json())},
          {"timeline", TimelineJson(BuildTimeline(in), in)},
          {"front", FrontJson(in)},
          {"events", EventsJson(in)}};
}

}  // namespace hyperpack::report
