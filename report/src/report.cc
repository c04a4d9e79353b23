// The read commands: `hyperpack studies`, `status STUDY`, `trials STUDY` and `best STUDY`, each a
// StudyView (study_view.h) read once and rendered as a table or text for people, or JSON.
#include "hyperpack/report/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "costs.h"
#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/table.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/cost_model.h"
#include "study_text.h"
#include "study_view.h"

namespace hyperpack::report {

using storage::Storage;
using storage::StudyRecord;
using storage::TrialRecord;
using storage::TrialState;
using Json = nlohmann::ordered_json;

namespace {

std::optional<double> Duration(const TrialRecord& t) {
  if (!t.started) return std::nullopt;
  double end = t.ended ? *t.ended : WallNow();
  return end - *t.started;
}

Json TrialJson(const TrialRecord& t, const SearchSpace* space) {
  Json j;
  j["trial"] = t.number;
  j["state"] = storage::TrialStateName(t.state);
  j["value"] = t.value ? Json(*t.value) : Json(nullptr);
  if (!t.values.empty()) j["values"] = t.values;
  j["params"] = ParamsJson(t, space);
  j["started"] = t.started ? Json(*t.started) : Json(nullptr);
  j["ended"] = t.ended ? Json(*t.ended) : Json(nullptr);
  auto d = Duration(t);
  j["duration_s"] = d ? Json(*d) : Json(nullptr);
  j["exit_status"] = t.exit_status ? Json(*t.exit_status) : Json(nullptr);
  j["error"] = t.error;
  j["host"] = t.host;
  j["attempt"] = t.attempt;
  j["retry_of"] = t.retry_of ? Json(*t.retry_of) : Json(nullptr);
  j["log"] = t.log_path;
  return j;
}

}  // namespace

Status ReportStudies(Storage& db, OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(auto studies, db.ListStudies());
  Json all = Json::array();
  Table table({"study", "state", "trials", "best", "metric", "created"});
  for (const StudyRecord& s : studies) {
    HP_ASSIGN_OR_RETURN(StudyView l, ReadStudySummary(db, s.name, Tolerance{}));
    const std::optional<BestTrial> chosen = BestOf(l);
    std::optional<double> best;
    if (chosen) best = chosen->value;
    std::string state = RunnerStateName(RunnerStateOf(l));
    if (format == OutputFormat::kJson) {
      Json j;
      j["study"] = s.name;
      j["state"] = state;
      j["metric"] = s.metric;
      j["direction"] = DirectionName(s.direction);
      j["trials"] = CountStates(Tally(l));
      j["best"] = best ? Json(*best) : Json(nullptr);
      j["best_trial"] = chosen ? Json(chosen->trial.number) : Json(nullptr);
      j["created"] = s.created;
      all.push_back(j);
    } else {
      table.AddRow({s.name, state, CountsText(CountStates(Tally(l))), ValueText(best),
                    StrCat(s.metric, Maximize(s) ? " (max)" : " (min)"),
                    FormatTimestamp(s.created)});
    }
  }
  if (format == OutputFormat::kJson) {
    out << all.dump(2) << "\n";
  } else if (studies.empty()) {
    out << "no studies in " << db.path() << "; start one with: hyperpack run STUDY.yaml\n";
  } else {
    table.Print(out);
  }
  return Status::Ok();
}

namespace {
std::string CostShort(const TrialCost& c);

// `status` shows the trade-off at this tolerance: the cheapest trial within 1% of the best.
constexpr Tolerance kTradeOff{0.01, /*relative=*/true};

struct TradeOff {
  const TrialRecord* trial = nullptr;  // cheaper than the best, within kTradeOff; else null
  TrialCost cost, best_cost;
};

TradeOff FindTradeOff(const StudyView& l, const std::vector<const TrialRecord*>& ranked,
                      const std::optional<BestTrial>& best) {
  TradeOff t;
  // A mean of runs, or a model's pick of every run, against one lucky draw is no trade-off.
  if (ranked.size() < 2 || !best || best->runs > 1 || best->by_model) return t;
  const auto costs = TrialCosts(l);
  const TrialRecord* pick = CheapestWithin(ranked, costs, kTradeOff, Maximize(l.study));
  auto c = costs.find(pick->number), b = costs.find(ranked.front()->number);
  if (pick == ranked.front() || c == costs.end() || b == costs.end()) return t;
  t.trial = pick;
  t.cost = c->second;
  t.best_cost = b->second;
  return t;
}
}  // namespace

namespace {

Json StudyJson(const StudyView& l, const std::string& state,
               const std::vector<const TrialRecord*>& ranked, const std::optional<BestTrial>& best,
               const TradeOff& trade_off) {
  Json j;
  j["study"] = l.study.name;
  j["state"] = state;
  j["metric"] = l.study.metric;
  j["direction"] = DirectionName(l.study.direction);
  j["trials"] = CountStates(Tally(l));
  j["max_trials"] = l.spec ? Json(l.spec->budget.max_trials) : Json(nullptr);
  j["priority"] = l.spec ? Json(l.spec->priority) : Json(nullptr);
  j["best"] = ranked.empty() ? Json(nullptr) : TrialJson(*ranked.front(), l.space());
  if (best && best->by_model) j["best"]["chosen_by"] = "model";
  if (best && best->reruns_repeat) j["best"]["reruns_repeat"] = true;
  j["cheaper_within_1%"] = trade_off.trial
                               ? Json{{"trial", trade_off.trial->number},
                                      {"value", *trade_off.trial->value},
                                      {"cost", trade_off.cost.cost},
                                      {"best_cost", trade_off.best_cost.cost},
                                      {"cost_unit", trade_off.cost.gpu() ? "GPU-s" : "CPU-s"}}
                               : Json(nullptr);
  std::optional<double> elapsed = StudyElapsed(l);
  j["elapsed_s"] = elapsed ? Json(*elapsed) : Json(nullptr);
  j["runner_pid"] = l.study.runner_pid ? Json(*l.study.runner_pid) : Json(nullptr);
  return j;
}

// The best trial's line and, when there is one, the cheaper trial within 1% of it.
void PrintBest(const StudyView& l, const std::vector<const TrialRecord*>& ranked,
               const std::optional<BestTrial>& best, const TradeOff& trade_off, std::ostream& out) {
  if (l.spec && l.spec->MultiObjective()) {
    // Several objectives have no best: the size of the front, and where to read it.
    out << "front      " << ParetoSet(l).size() << " trials on the Pareto set; hyperpack best "
        << l.study.name << "\n";
    return;
  }
  if (ranked.empty()) {
    out << "best       - (no completed trial yet)\n";
    return;
  }
  const TrialRecord& b = best->trial;  // ranked is not empty
  out << "best       " << FormatShort(best->value, 6) << " (trial " << b.number
      << (best->runs > 1 ? StrCat(", the mean of its configuration's ", best->runs, " runs") : "")
      << (best->by_model ? ", the model's pick of every run" : "")
      << (best->reruns_repeat ? ", the best single run: re-runs repeat their first runs" : "")
      << ")  " << ParamsText(b, l.space()) << "\n";
  const TrialRecord* c = trade_off.trial;
  if (!c) return;
  out << "cheaper    " << FormatShort(*c->value, 6) << " (trial " << c->number
      << "), within 1% of the best: " << CostShort(trade_off.cost) << " against "
      << CostShort(trade_off.best_cost);
  if (trade_off.cost.gpu() == trade_off.best_cost.gpu() && trade_off.cost.cost > 0)
    out << " (" << FormatShort(trade_off.best_cost.cost / trade_off.cost.cost, 3) << "x less)";
  out << "; hyperpack best " << l.study.name << " --within 1%\n";
}

// "minimize loss", or with several objectives "minimize loss, maximize accuracy"; and each
// constraint.
std::string ObjectivesText(const StudyView& l) {
  if (!l.spec) return StrCat(DirectionName(l.study.direction), " ", l.study.metric);
  std::vector<std::string> parts;
  for (const study::Objective& o : l.spec->objectives)
    parts.push_back(StrCat(DirectionName(o.direction), " ", o.metric));
  for (const study::Constraint& c : l.spec->constraints)
    parts.push_back(StrCat(
        "subject to ", c.metric,
        c.bound == study::Constraint::Bound::kMax ? " <= " : " >= ", FormatShort(c.limit, 6)));
  return Join(parts, ", ");
}

void PrintEvents(const std::vector<storage::EventRecord>& events, std::ostream& out) {
  if (events.empty()) return;
  out << "\nrecent events\n";
  for (const auto& e : events) {
    out << "  " << FormatTimestamp(e.time) << "  " << e.kind;
    if (e.trial) out << " trial " << *e.trial;
    if (!e.message.empty()) out << ": " << e.message;
    out << "\n";
  }
}

}  // namespace

Status ReportStudy(Storage& db, const std::string& name, OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudySummary(db, name, kTradeOff));
  auto ranked = Ranked(l);
  // Read once: with budget.rerun_top, BestOf ranks by the model's pick.
  const std::optional<BestTrial> best = BestOf(l);
  const TradeOff trade_off = FindTradeOff(l, ranked, best);
  std::string state = RunnerStateName(RunnerStateOf(l));
  HP_ASSIGN_OR_RETURN(auto events, db.ListEvents(l.study.id, 8));
  HP_ASSIGN_OR_RETURN(auto conditions, ReadConditions(db, name));
  if (format == OutputFormat::kJson) {
    Json j = StudyJson(l, state, ranked, best, trade_off);
    j["conditions"] = Json::parse(ConditionsJson(conditions));
    out << j.dump(2) << "\n";
    return Status::Ok();
  }
  out << "study      " << l.study.name << " (" << state << ")\n";
  // A pause or a stop asked of a live run is what a runner's state alone does not say.
  if (const StudyCondition& now = conditions.back();
      now.type == ConditionType::kPaused || now.type == ConditionType::kStopping)
    out << "condition  " << ConditionTypeName(now.type) << " (" << now.reason << ") since "
        << FormatTimestamp(now.time) << ": " << now.message << "\n";
  out << (l.spec && l.spec->MultiObjective() ? "objectives " : "objective  ") << ObjectivesText(l)
      << "\n";
  // Its weight in a server's fair share; 1, the default, is not worth a line.
  if (l.spec && l.spec->priority != 1)
    out << "priority   " << FormatShort(l.spec->priority, 4)
        << " (its weight in the share of a server that runs several studies)\n";
  const storage::TrialTally tally = Tally(l);
  out << "trials     " << CountsText(CountStates(tally));
  if (l.spec)
    out << "  [" << tally.Finished() << "/" << l.spec->budget.max_trials << " of the budget]";
  out << "\n";
  if (auto elapsed = StudyElapsed(l)) out << "elapsed    " << FormatDuration(*elapsed) << "\n";
  PrintBest(l, ranked, best, trade_off, out);
  PrintEvents(events, out);
  return Status::Ok();
}

namespace {

// "0.002", "0.2%".
std::string WithinText(const Tolerance& t) {
  return t.relative ? FormatShort(t.amount * 100, 6) + "%" : FormatShort(t.amount, 6);
}

// "200 GPU-s", "1.2 CPU-h".
std::string CostShort(const TrialCost& c) {
  const bool gpu = c.gpu();
  return c.cost >= 3600 ? FormatShort(c.cost / 3600, 3) + (gpu ? " GPU-h" : " CPU-h")
                        : FormatShort(c.cost, 3) + (gpu ? " GPU-s" : " CPU-s");
}

// "1.2 GPU-h (2 GPUs for 36 min)", "95.1 CPU-s (1 CPU slot for 1:35)".
std::string CostText(const TrialCost& c) {
  const bool gpu = c.gpu();
  const int units = gpu ? c.gpus : std::max(c.cpus, 1);
  return StrCat(CostShort(c), " (", units,
                gpu ? (units == 1 ? " GPU" : " GPUs") : (units == 1 ? " CPU slot" : " CPU slots"),
                " for ", FormatDuration(c.seconds), ")");
}

// What each trial cost and what the cost model predicted for it, by trial number.
struct CostsOfTrials {
  std::map<int, TrialCost> measured;
  std::map<int, tuner::CostPrediction> predicted;
  bool predicted_gpu = false;
  const TrialCost* Measured(const TrialRecord& t) const {
    auto it = measured.find(t.number);
    return it == measured.end() ? nullptr : &it->second;
  }
  const tuner::CostPrediction* Predicted(const TrialRecord& t) const {
    auto it = predicted.find(t.number);
    return it == predicted.end() ? nullptr : &it->second;
  }
};

// A study that keeps values: whether each trial is on the Pareto set, and whether it meets the
// constraints, by trial number.
struct FrontMarks {
  std::set<int> front;
  bool multi = false, constrained = false;
  explicit FrontMarks(const StudyView& l) {
    if (!l.spec) return;
    multi = l.spec->MultiObjective();
    constrained = !l.spec->constraints.empty();
    for (const TrialRecord* t : ParetoSet(l)) front.insert(t->number);
  }
  bool OnFront(const TrialRecord& t) const { return front.count(t.number) > 0; }
};

// The metrics a study keeps (objectives, then constraints not among them), for columns.
std::vector<std::string> KeptMetrics(const study::StudySpec& spec) {
  std::vector<std::string> metrics;
  for (const study::Objective& o : spec.objectives) metrics.push_back(o.metric);
  for (const study::Constraint& c : spec.constraints)
    if (std::find(metrics.begin(), metrics.end(), c.metric) == metrics.end())
      metrics.push_back(c.metric);
  return metrics;
}

Json TrialsJson(const StudyView& l, const CostsOfTrials& costs) {
  Json all = Json::array();
  const FrontMarks marks(l);
  for (const TrialRecord& t : l.trials) {
    Json j = TrialJson(t, l.space());
    if (marks.multi) j["front"] = marks.OnFront(t);
    if (marks.constrained && t.state == storage::TrialState::kCompleted)
      j["feasible"] = study::MeetsConstraints(*l.spec, t.values);
    const TrialCost* c = costs.Measured(t);
    j["cost"] = c ? Json(c->cost) : Json(nullptr);
    j["cost_unit"] = c && c->gpu() ? "GPU-s" : "CPU-s";
    const tuner::CostPrediction* p = costs.Predicted(t);
    j["predicted_cost"] = p ? Json({{"median", p->median},
                                    {"low", p->Low()},
                                    {"high", p->High()},
                                    {"unit", costs.predicted_gpu ? "GPU-s" : "CPU-s"}})
                            : Json(nullptr);
    all.push_back(std::move(j));
  }
  return all;
}

// The first line of a trial's error, after what it re-runs (`again_of`: a finalist's first run).
std::string TrialNote(const TrialRecord& t, std::optional<int> again_of = std::nullopt) {
  std::string note = t.error;
  if (t.retry_of) note = StrCat("re-run of ", *t.retry_of, note.empty() ? "" : "; ", note);
  if (again_of)
    note = StrCat("finalist: trial ", *again_of, "'s configuration again", note.empty() ? "" : "; ",
                  note);
  auto nl = note.find('\n');
  return nl == std::string::npos ? note : note.substr(0, nl);
}

// One row a trial, one column a parameter in the space's order.
void PrintTrialsTable(const StudyView& l, const CostsOfTrials& costs, std::ostream& out) {
  std::vector<std::string> params;
  if (l.spec) {
    for (const ParamSpec& p : l.spec->space.params())
      if (p.type != ParamType::kFixed) params.push_back(p.name);
  }
  const FrontMarks marks(l);
  const std::map<int, int> again = FinalistRepeats(l);
  const std::vector<std::string> kept =
      l.spec && l.spec->KeepsValues() ? KeptMetrics(*l.spec) : std::vector<std::string>();
  std::vector<std::string> headers = {"trial", "state"};
  if (kept.empty()) headers.push_back(l.study.metric);
  headers.insert(headers.end(), kept.begin(), kept.end());
  if (marks.multi) headers.push_back("front");
  headers.insert(headers.end(), params.begin(), params.end());
  headers.insert(headers.end(), {"duration", "cost", "predicted", "note"});
  Table table(headers);
  for (const TrialRecord& t : l.trials) {
    std::vector<std::string> row = {std::to_string(t.number), storage::TrialStateName(t.state)};
    if (kept.empty()) row.push_back(ValueText(t.value));
    for (const std::string& m : kept) {
      auto it = t.values.find(m);
      row.push_back(it == t.values.end() ? "-" : FormatShort(it->second, 6));
    }
    if (marks.multi) row.push_back(marks.OnFront(t) ? "*" : "");
    for (const std::string& p : params) {
      auto v = Lookup(t.params, p);
      row.push_back(v ? DisplayValue(*v) : "-");
    }
    auto d = Duration(t);
    row.push_back(d ? FormatDuration(*d) : "-");
    const TrialCost* c = costs.Measured(t);
    row.push_back(c ? CostShort(*c) : "-");
    // The median, and the factor of one standard deviation either side.
    const tuner::CostPrediction* p = costs.Predicted(t);
    row.push_back(p ? StrCat(CostShort({0, costs.predicted_gpu ? 1 : 0, 1, p->median}), " (x",
                             FormatShort(std::exp(p->log_sd), 2), ")")
                    : "-");
    auto a = again.find(t.number);
    std::string note = TrialNote(t, a == again.end() ? std::nullopt : std::optional(a->second));
    if (marks.constrained && t.state == storage::TrialState::kCompleted &&
        !study::MeetsConstraints(*l.spec, t.values))
      note = StrCat("breaks a constraint", note.empty() ? "" : "; ", note);
    row.push_back(note);
    table.AddRow(row);
  }
  table.Print(out, 48);
}

}  // namespace

Status ReportTrials(Storage& db, const std::string& name, OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kCosts));
  CostsOfTrials costs;
  costs.measured = TrialCosts(l);
  if (l.spec)
    costs.predicted = PredictedCosts(*l.spec, l.trials, costs.measured, &costs.predicted_gpu);
  if (format == OutputFormat::kJson) {
    out << TrialsJson(l, costs).dump(2) << "\n";
    return Status::Ok();
  }
  if (l.trials.empty()) {
    out << "study '" << name << "' has no trials yet\n";
    return Status::Ok();
  }
  PrintTrialsTable(l, costs, out);
  return Status::Ok();
}

namespace {

// `best` of a study with several objectives: its Pareto set, by the first objective.
// The Pareto set for programs: the objectives, the constraints and the members.
Json FrontJson(const StudyView& l, const std::vector<const TrialRecord*>& front) {
  const study::StudySpec& spec = *l.spec;
  Json o;
  o["study"] = l.study.name;
  o["objectives"] = Json::array();
  for (const study::Objective& ob : spec.objectives)
    o["objectives"].push_back({{"metric", ob.metric}, {"direction", DirectionName(ob.direction)}});
  o["constraints"] = Json::array();
  for (const study::Constraint& c : spec.constraints)
    o["constraints"].push_back(
        {{"metric", c.metric},
         {c.bound == study::Constraint::Bound::kMax ? "max" : "min", c.limit}});
  o["front"] = Json::array();
  for (const TrialRecord* t : front) o["front"].push_back(TrialJson(*t, l.space()));
  return o;
}

Status ReportFront(const StudyView& l, OutputFormat format, std::ostream& out) {
  const study::StudySpec& spec = *l.spec;
  std::vector<const TrialRecord*> front = ParetoSet(l);
  if (front.empty())
    return Status::NotFound("study '", l.study.name, "' has no completed trial",
                            spec.constraints.empty() ? "" : " that meets its constraints", " yet");
  const bool max0 = spec.objectives[0].direction == study::Direction::kMaximize;
  std::stable_sort(front.begin(), front.end(), [&](const TrialRecord* a, const TrialRecord* b) {
    const double x = a->values.at(spec.objectives[0].metric);
    const double y = b->values.at(spec.objectives[0].metric);
    return max0 ? x > y : x < y;
  });
  if (format == OutputFormat::kJson) {
    out << FrontJson(l, front).dump(2) << "\n";
    return Status::Ok();
  }
  std::vector<std::string> metrics;
  std::vector<std::string> headers = {"trial"};
  for (const study::Objective& ob : spec.objectives) metrics.push_back(ob.metric);
  for (const study::Constraint& c : spec.constraints)
    if (std::find(metrics.begin(), metrics.end(), c.metric) == metrics.end())
      metrics.push_back(c.metric);
  headers.insert(headers.end(), metrics.begin(), metrics.end());
  std::vector<std::string> params;
  for (const ParamSpec& p : spec.space.params())
    if (p.type != ParamType::kFixed) params.push_back(p.name);
  headers.insert(headers.end(), params.begin(), params.end());
  Table table(headers);
  for (const TrialRecord* t : front) {
    std::vector<std::string> row = {std::to_string(t->number)};
    for (const std::string& m : metrics) {
      auto it = t->values.find(m);
      row.push_back(it == t->values.end() ? "-" : FormatShort(it->second, 6));
    }
    for (const std::string& p : params) {
      auto v = Lookup(t->params, p);
      row.push_back(v ? DisplayValue(*v) : "-");
    }
    table.AddRow(row);
  }
  int completed = 0;
  for (const auto& [state, n] : Tally(l).counts)
    if (state == storage::TrialState::kCompleted) completed = n;
  std::vector<std::string> goals;
  for (const study::Objective& ob : spec.objectives)
    goals.push_back(StrCat(DirectionName(ob.direction), " ", ob.metric));
  out << "Pareto set: " << front.size() << " of " << completed << " completed trials ("
      << Join(goals, ", ") << (spec.constraints.empty() ? "" : "; those meeting the constraints")
      << ")\n";
  table.Print(out, 24);
  return Status::Ok();
}

}  // namespace

namespace {

// One trial chosen (--trial, --pick): its values and configuration.
Status ReportChosen(const StudyView& l, const TrialRecord& t, const std::string& why,
                    OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kJson) {
    Json o;
    o["study"] = l.study.name;
    const Json j = TrialJson(t, l.space());
    for (auto& [k, v] : j.items()) o[k] = v;
    o["chosen"] = why;
    out << o.dump(2) << "\n";
    return Status::Ok();
  }
  out << "trial " << t.number << " (" << storage::TrialStateName(t.state) << "), " << why << "\n";
  if (!t.values.empty()) {
    for (const auto& [metric, v] : t.values)
      out << "  " << metric << " = " << FormatShort(v, 6) << "\n";
  } else if (t.value) {
    out << "  " << l.study.metric << " = " << FormatShort(*t.value, 6) << "\n";
  }
  for (const std::string& p : ConfigNames(t.params, l.space()))
    out << "  " << p << ": " << FormatValue(t.params.at(p)) << "\n";
  return Status::Ok();
}

Status ReportOneTrial(Storage& db, const std::string& name, const Choice& choice,
                      OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kTrials));
  if (choice.pick) {
    HP_ASSIGN_OR_RETURN(const TrialRecord* t, PickFromFront(l, *choice.pick));
    const std::string by = choice.pick->by.empty() ? l.spec->objectives[0].metric : choice.pick->by;
    const std::string why =
        StrCat("picked from the Pareto set",
               choice.pick->conditions.empty() ? "" : " among " + ConditionsText(*choice.pick),
               ", the best ", by);
    return ReportChosen(l, *t, why, format, out);
  }
  for (const TrialRecord& t : l.trials)
    if (t.number == *choice.trial) return ReportChosen(l, t, "chosen by number", format, out);
  return Status::NotFound("study '", name, "' has no trial ", *choice.trial);
}

}  // namespace

namespace {

// "loss = 0.25" or, for a configuration's mean, "loss = 0.25, the mean of its configuration's 2
// runs".
std::string ValueText(const StudyView& l, double value, int runs) {
  std::string text = l.study.metric + " = " + FormatShort(value, 6);
  if (runs > 1) text += StrCat(", the mean of its configuration's ", runs, " runs");
  return text;
}

int TrialsIn(const StudyView& l) {
  int total = 0;
  for (const auto& [state, n] : Tally(l).counts) total += n;
  return total;
}

void PrintParams(const StudyView& l, const TrialRecord& t, std::ostream& out) {
  for (const std::string& name : ConfigNames(t.params, l.space()))
    out << "  " << name << ": " << FormatValue(t.params.at(name)) << "\n";
}

Json BestJsonHead(const StudyView& l, const TrialRecord& t) {
  Json o;
  o["study"] = l.study.name;
  o["metric"] = l.study.metric;
  o["direction"] = DirectionName(l.study.direction);
  const Json trial = TrialJson(t, l.space());  // items() must not outlive it
  for (auto& [k, v] : trial.items()) o[k] = v;
  return o;
}

// `best --within`: the cheapest trial (with finalists, configuration) within a tolerance of the
// best, its cost and the best's.
Status ReportWithin(const StudyView& l, const std::string& name, OutputFormat format,
                    const Tolerance& within, std::ostream& out) {
  const std::map<int, TrialCost> costs = TrialCosts(l);
  std::optional<WithinChoice> w = ChooseWithin(l, costs, within);
  if (!w) return Status::NotFound("study '", name, "' has no completed trial yet");
  auto cost_of = [&](const TrialRecord& t) -> std::optional<TrialCost> {
    auto it = costs.find(t.number);
    return it == costs.end() ? std::nullopt : std::optional<TrialCost>(it->second);
  };
  const std::optional<TrialCost> c = cost_of(*w->trial), bc = cost_of(*w->best);
  if (format == OutputFormat::kJson) {
    Json o = BestJsonHead(l, *w->trial);
    if (w->runs > 1) o["mean"] = {{"value", w->value}, {"runs", w->runs}};
    o["cost"] = c ? Json(c->cost) : Json(nullptr);
    o["cost_unit"] = c && c->gpu() ? "GPU-s" : "CPU-s";
    o["within"] = {{"amount", within.amount}, {"relative", within.relative}};
    o["best"] = {{"trial", w->best->number},
                 {"value", w->best_value},
                 {"cost", bc ? Json(bc->cost) : Json(nullptr)}};
    if (w->best_runs > 1) o["best"]["runs"] = w->best_runs;
    out << o.dump(2) << "\n";
    return Status::Ok();
  }
  out << "cheapest within " << WithinText(within) << " of the best"
      << (w->best_runs > 1 ? " mean" : "") << ": " << ValueText(l, w->value, w->runs) << " (trial "
      << w->trial->number << " of " << TrialsIn(l) << ")\n";
  PrintParams(l, *w->trial, out);
  if (c) out << "cost " << CostText(*c);
  if (c && bc && w->trial != w->best && c->gpu() == bc->gpu() && c->cost > 0)
    out << ", " << FormatShort(bc->cost / c->cost, 3) << "x less than the best's";
  if (c) out << "\n";
  out << "the best: " << ValueText(l, w->best_value, w->best_runs) << " (trial " << w->best->number
      << ")" << (bc ? ", cost " + CostText(*bc) : std::string()) << "\n";
  return Status::Ok();
}

// `best --by-model`: the trial whose configuration the model recommends, and the study's best.
Status ReportModelPick(const StudyView& l, OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(ModelPick pick, PickByModel(l));
  const std::optional<BestTrial> best = BestOf(l);  // there is one: the pick completed
  const TrialRecord& t = *pick.trial;
  if (format == OutputFormat::kJson) {
    Json o = BestJsonHead(l, t);
    o["chosen_by"] = "model";
    o["noise_share"] = pick.noise_share;
    o["best"] = {{"trial", best->trial.number}, {"value", best->value}};
    if (best->runs > 1) o["best"]["runs"] = best->runs;
    out << o.dump(2) << "\n";
    return Status::Ok();
  }
  out << "the model's pick: " << ValueText(l, *t.value, 1) << " (trial " << t.number << " of "
      << TrialsIn(l) << "; the model reads " << FormatShort(100 * pick.noise_share, 2)
      << "% of the values' spread as noise)\n";
  PrintParams(l, t, out);
  out << "the best: " << ValueText(l, best->value, best->runs) << " (trial " << best->trial.number
      << ")" << (best->trial.number == t.number ? ", the same trial" : "") << "\n";
  return Status::Ok();
}

// `best` of a study with one objective: the best trial (with finalists, the configuration with
// the best mean of its runs), or the cheapest within a tolerance.
Status ReportSingleBest(const StudyView& l, const std::string& name, OutputFormat format,
                        const std::optional<Tolerance>& within, std::ostream& out) {
  if (within) return ReportWithin(l, name, format, *within, out);
  const std::optional<BestTrial> best = BestOf(l);
  if (!best) return Status::NotFound("study '", name, "' has no completed trial yet");
  const TrialRecord& b = best->trial;
  if (format == OutputFormat::kJson) {
    Json o = BestJsonHead(l, b);
    if (best->runs > 1) o["mean"] = {{"value", best->value}, {"runs", best->runs}};
    if (best->by_model) o["chosen_by"] = "model";
    if (best->reruns_repeat) o["reruns_repeat"] = true;
    out << o.dump(2) << "\n";
    return Status::Ok();
  }
  if (best->by_model) {
    out << "best " << ValueText(l, *b.value, 1) << " (trial " << b.number << " of " << TrialsIn(l)
        << ": the model's pick of every run, budget.rerun_top)\n";
  } else if (best->runs > 1) {
    out << "best " << ValueText(l, best->value, best->runs) << " (trial " << b.number << " of "
        << TrialsIn(l) << ": " << FormatShort(*b.value, 6) << ")\n";
  } else {
    out << "best " << ValueText(l, *b.value, 1) << " (trial " << b.number << " of " << TrialsIn(l)
        << (best->reruns_repeat ? ": the best single run, as the re-runs returned their first "
                                  "runs' values exactly"
                                : "")
        << ")\n";
  }
  PrintParams(l, b, out);
  return Status::Ok();
}

}  // namespace

Result<std::optional<BestTrial>> FindBestTrial(Storage& db, const std::string& name) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudySummary(db, name, Tolerance{}));
  return BestOf(l);
}

Result<ModelRecommendation> RecommendTrial(Storage& db, const std::string& name) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kTrials));
  HP_ASSIGN_OR_RETURN(ModelPick pick, PickByModel(l));
  return ModelRecommendation{*pick.trial, pick.noise_share};
}

Status ReportBest(Storage& db, const std::string& name, OutputFormat format, const Choice& choice,
                  std::ostream& out) {
  if (choice.trial.has_value() + choice.within.has_value() + choice.pick.has_value() +
          choice.by_model >
      1)
    return Status::Invalid(
        "--trial, --within, --pick and --by-model each choose a trial: give one of them");
  if (choice.trial || choice.pick) return ReportOneTrial(db, name, choice, format, out);
  if (choice.by_model) {
    HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kTrials));
    return ReportModelPick(l, format, out);
  }
  const std::optional<Tolerance>& within = choice.within;
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudySummary(db, name, within.value_or(Tolerance{})));
  if (!l.spec || !l.spec->MultiObjective()) return ReportSingleBest(l, name, format, within, out);
  if (within)
    return Status::Invalid("--within picks the cheapest trial near the best value; study '", name,
                           "' has several objectives and a Pareto set instead (choose one with "
                           "--pick CONDITIONS --by METRIC)");
  return ReportFront(l, format, out);
}

}  // namespace hyperpack::report
