#include "hyperpack/report/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "costs.h"
#include "hyperpack/config_json.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/study/template.h"
#include "hyperpack/table.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/cost_model.h"
#include "launchers.h"
#include "loaded.h"
#include "study_text.h"

namespace hyperpack::report {

using storage::Storage;
using storage::StudyRecord;
using storage::TrialRecord;
using storage::TrialState;
using study::ParamEnvName;
using study::ParseOutcome;
using study::ParseStudy;
using study::StudySpec;
using Json = nlohmann::ordered_json;

Result<Loaded> Load(Storage& db, const std::string& name) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found) {
    HP_ASSIGN_OR_RETURN(auto all, db.ListStudies());
    std::vector<std::string> names;
    for (const auto& s : all) names.push_back(s.name);
    auto guess = DidYouMean(name, names);
    return Status::NotFound("no study named '", name, "' in ", db.path(),
                            guess ? "; did you mean '" + *guess + "'?" : std::string(""));
  }
  Loaded l;
  l.study = *found;
  HP_ASSIGN_OR_RETURN(l.trials, db.ListTrials(l.study.id));
  ParseOutcome parsed = ParseStudy(l.study.spec_text, l.study.spec_path);
  l.spec = parsed.spec;
  return l;
}

namespace {

std::optional<double> Duration(const TrialRecord& t) {
  if (!t.started) return std::nullopt;
  double end = t.ended ? *t.ended : WallNow();
  return end - *t.started;
}

Json TrialJson(const TrialRecord& t) {
  Json j;
  j["trial"] = t.number;
  j["state"] = storage::TrialStateName(t.state);
  j["value"] = t.value ? Json(*t.value) : Json(nullptr);
  j["params"] = ParamsJson(t);
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
    HP_ASSIGN_OR_RETURN(Loaded l, Load(db, s.name));
    auto ranked = Ranked(l.study, l.trials);
    std::optional<double> best;
    if (!ranked.empty()) best = ranked.front()->value;
    std::string state = RunnerStateName(RunnerStateOf(s, &l));
    if (format == OutputFormat::kJson) {
      Json j;
      j["study"] = s.name;
      j["state"] = state;
      j["metric"] = s.metric;
      j["direction"] = DirectionName(s.direction);
      j["trials"] = CountStates(l.trials);
      j["best"] = best ? Json(*best) : Json(nullptr);
      j["best_trial"] = ranked.empty() ? Json(nullptr) : Json(ranked.front()->number);
      j["created"] = s.created;
      all.push_back(j);
    } else {
      table.AddRow({s.name, state, CountsText(CountStates(l.trials)), ValueText(best),
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
Result<std::map<int, TrialCost>> LoadCosts(Storage& db, const Loaded& l);
std::string CostShort(const TrialCost& c);

// `status` shows the trade-off at this tolerance: the cheapest trial within 1% of the best.
constexpr Tolerance kTradeOff{0.01, /*relative=*/true};

struct TradeOff {
  const TrialRecord* trial = nullptr;  // cheaper than the best, within kTradeOff; else null
  TrialCost cost, best_cost;
};

Result<TradeOff> FindTradeOff(Storage& db, const Loaded& l,
                              const std::vector<const TrialRecord*>& ranked) {
  TradeOff t;
  if (ranked.size() < 2) return t;
  HP_ASSIGN_OR_RETURN(const auto costs, LoadCosts(db, l));
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

// Seconds from the first trial's start to the last one's end (or now, while one runs).
std::optional<double> Elapsed(const std::vector<TrialRecord>& trials) {
  std::optional<double> first_start, last_end;
  for (const TrialRecord& t : trials) {
    if (t.started && (!first_start || *t.started < *first_start)) first_start = t.started;
    double end = t.ended ? *t.ended : WallNow();
    if (t.started && (!last_end || end > *last_end)) last_end = end;
  }
  if (!first_start) return std::nullopt;
  return *last_end - *first_start;
}

Json StudyJson(const Loaded& l, const std::string& state,
               const std::vector<const TrialRecord*>& ranked, const TradeOff& trade_off) {
  Json j;
  j["study"] = l.study.name;
  j["state"] = state;
  j["metric"] = l.study.metric;
  j["direction"] = DirectionName(l.study.direction);
  j["trials"] = CountStates(l.trials);
  j["max_trials"] = l.spec ? Json(l.spec->budget.max_trials) : Json(nullptr);
  j["priority"] = l.spec ? Json(l.spec->priority) : Json(nullptr);
  j["best"] = ranked.empty() ? Json(nullptr) : TrialJson(*ranked.front());
  j["cheaper_within_1%"] = trade_off.trial
                               ? Json{{"trial", trade_off.trial->number},
                                      {"value", *trade_off.trial->value},
                                      {"cost", trade_off.cost.cost},
                                      {"best_cost", trade_off.best_cost.cost},
                                      {"cost_unit", trade_off.cost.gpu() ? "GPU-s" : "CPU-s"}}
                               : Json(nullptr);
  std::optional<double> elapsed = Elapsed(l.trials);
  j["elapsed_s"] = elapsed ? Json(*elapsed) : Json(nullptr);
  j["runner_pid"] = l.study.runner_pid ? Json(*l.study.runner_pid) : Json(nullptr);
  return j;
}

// The best trial's line and, when there is one, the cheaper trial within 1% of it.
void PrintBest(const Loaded& l, const std::vector<const TrialRecord*>& ranked,
               const TradeOff& trade_off, std::ostream& out) {
  if (ranked.empty()) {
    out << "best       - (no completed trial yet)\n";
    return;
  }
  const TrialRecord& b = *ranked.front();
  out << "best       " << FormatShort(*b.value, 6) << " (trial " << b.number << ")  "
      << ParamsText(b) << "\n";
  const TrialRecord* c = trade_off.trial;
  if (!c) return;
  out << "cheaper    " << FormatShort(*c->value, 6) << " (trial " << c->number
      << "), within 1% of the best: " << CostShort(trade_off.cost) << " against "
      << CostShort(trade_off.best_cost);
  if (trade_off.cost.gpu() == trade_off.best_cost.gpu() && trade_off.cost.cost > 0)
    out << " (" << FormatShort(trade_off.best_cost.cost / trade_off.cost.cost, 3) << "x less)";
  out << "; hyperpack best " << l.study.name << " --within 1%\n";
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
  HP_ASSIGN_OR_RETURN(Loaded l, Load(db, name));
  auto ranked = Ranked(l.study, l.trials);
  HP_ASSIGN_OR_RETURN(const TradeOff trade_off, FindTradeOff(db, l, ranked));
  std::string state = RunnerStateName(RunnerStateOf(l.study, &l));
  HP_ASSIGN_OR_RETURN(auto events, db.ListEvents(l.study.id, 8));
  if (format == OutputFormat::kJson) {
    out << StudyJson(l, state, ranked, trade_off).dump(2) << "\n";
    return Status::Ok();
  }
  out << "study      " << l.study.name << " (" << state << ")\n";
  out << "objective  " << DirectionName(l.study.direction) << " " << l.study.metric << "\n";
  // Its weight in a server's fair share; 1, the default, is not worth a line.
  if (l.spec && l.spec->priority != 1)
    out << "priority   " << FormatShort(l.spec->priority, 4)
        << " (its weight in the share of a server that runs several studies)\n";
  int finished = 0;
  for (const TrialRecord& t : l.trials) finished += storage::IsFinished(t.state);
  out << "trials     " << CountsText(CountStates(l.trials));
  if (l.spec) out << "  [" << finished << "/" << l.spec->budget.max_trials << " of the budget]";
  out << "\n";
  if (auto elapsed = Elapsed(l.trials)) out << "elapsed    " << FormatDuration(*elapsed) << "\n";
  PrintBest(l, ranked, trade_off, out);
  PrintEvents(events, out);
  return Status::Ok();
}

namespace {

// Each trial's cost (TrialCosts): its runs' times, which its pauses and resumes split.
Result<std::map<int, TrialCost>> LoadCosts(Storage& db, const Loaded& l) {
  PageInput in;
  in.study = l.study;
  in.trials = l.trials;
  constexpr storage::EventKind kRuns[] = {storage::EventKind::kTrialPaused,
                                          storage::EventKind::kTrialResumed};
  HP_ASSIGN_OR_RETURN(in.events, db.ListEventsOfKinds(l.study.id, kRuns));
  in.now = WallNow();
  return TrialCosts(in);
}

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

Json TrialsJson(const Loaded& l, const CostsOfTrials& costs) {
  Json all = Json::array();
  for (const TrialRecord& t : l.trials) {
    Json j = TrialJson(t);
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

// The first line of a trial's error, after what it re-runs.
std::string TrialNote(const TrialRecord& t) {
  std::string note = t.error;
  if (t.retry_of) note = StrCat("re-run of ", *t.retry_of, note.empty() ? "" : "; ", note);
  auto nl = note.find('\n');
  return nl == std::string::npos ? note : note.substr(0, nl);
}

// One row a trial, one column a parameter in the space's order.
void PrintTrialsTable(const Loaded& l, const CostsOfTrials& costs, std::ostream& out) {
  std::vector<std::string> params;
  if (l.spec) {
    for (const ParamSpec& p : l.spec->space.params())
      if (p.type != ParamType::kFixed) params.push_back(p.name);
  }
  std::vector<std::string> headers = {"trial", "state", l.study.metric};
  headers.insert(headers.end(), params.begin(), params.end());
  headers.insert(headers.end(), {"duration", "cost", "predicted", "note"});
  Table table(headers);
  for (const TrialRecord& t : l.trials) {
    std::vector<std::string> row = {std::to_string(t.number), storage::TrialStateName(t.state),
                                    ValueText(t.value)};
    auto config = ConfigFromJson(t.params_json);
    for (const std::string& p : params) {
      auto v = Lookup(config, p);
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
    row.push_back(TrialNote(t));
    table.AddRow(row);
  }
  table.Print(out, 48);
}

}  // namespace

Status ReportTrials(Storage& db, const std::string& name, OutputFormat format, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(Loaded l, Load(db, name));
  CostsOfTrials costs;
  HP_ASSIGN_OR_RETURN(costs.measured, LoadCosts(db, l));
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

Status ReportBest(Storage& db, const std::string& name, OutputFormat format,
                  const std::optional<Tolerance>& within, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(Loaded l, Load(db, name));
  auto ranked = Ranked(l.study, l.trials);
  if (ranked.empty()) return Status::NotFound("study '", name, "' has no completed trial yet");
  const TrialRecord& top = *ranked.front();
  const TrialRecord* pick = &top;
  std::map<int, TrialCost> costs;
  if (within) {
    HP_ASSIGN_OR_RETURN(costs, LoadCosts(db, l));
    pick = CheapestWithin(ranked, costs, *within, Maximize(l.study));
  }
  const TrialRecord& b = *pick;
  auto cost_of = [&](const TrialRecord& t) -> std::optional<TrialCost> {
    auto it = costs.find(t.number);
    return it == costs.end() ? std::nullopt : std::optional<TrialCost>(it->second);
  };
  if (format == OutputFormat::kJson) {
    Json j = TrialJson(b);
    Json o;
    o["study"] = l.study.name;
    o["metric"] = l.study.metric;
    o["direction"] = DirectionName(l.study.direction);
    for (auto& [k, v] : j.items()) o[k] = v;
    if (within) {
      auto c = cost_of(b), bc = cost_of(top);
      o["cost"] = c ? Json(c->cost) : Json(nullptr);
      o["cost_unit"] = c && c->gpu() ? "GPU-s" : "CPU-s";
      o["within"] = {{"amount", within->amount}, {"relative", within->relative}};
      o["best"] = {{"trial", top.number},
                   {"value", *top.value},
                   {"cost", bc ? Json(bc->cost) : Json(nullptr)}};
    }
    out << o.dump(2) << "\n";
    return Status::Ok();
  }
  if (within) {
    out << "cheapest within " << WithinText(*within) << " of the best: " << l.study.metric << " = "
        << FormatShort(*b.value, 6) << " (trial " << b.number << " of " << l.trials.size() << ")\n";
  } else {
    out << "best " << l.study.metric << " = " << FormatShort(*b.value, 6) << " (trial " << b.number
        << " of " << l.trials.size() << ")\n";
  }
  auto config = ConfigFromJson(b.params_json);
  Json params = ParamsJson(b);
  for (const auto& [k, unused] : params.items()) {
    if (auto v = Lookup(config, k)) out << "  " << k << ": " << FormatValue(*v) << "\n";
  }
  if (within) {
    auto c = cost_of(b), bc = cost_of(top);
    if (c) out << "cost " << CostText(*c);
    if (c && bc && &b != &top && c->gpu() == bc->gpu() && c->cost > 0)
      out << ", " << FormatShort(bc->cost / c->cost, 3) << "x less than the best's";
    if (c) out << "\n";
    out << "the best: " << l.study.metric << " = " << FormatShort(*top.value, 6) << " (trial "
        << top.number << ")" << (bc ? ", cost " + CostText(*bc) : std::string()) << "\n";
  }
  return Status::Ok();
}

Result<ExportFormat> ParseExportFormat(const std::string& name) {
  static const std::pair<const char*, ExportFormat> kFormats[] = {
      {"yaml", ExportFormat::kYaml},
      {"json", ExportFormat::kJson},
      {"env", ExportFormat::kEnv},
      {"args", ExportFormat::kArgs},
      {"deepspeed", ExportFormat::kDeepSpeed},
      {"torchrun", ExportFormat::kTorchrun},
      {"hf", ExportFormat::kHuggingFace},
      {"lightning", ExportFormat::kLightning},
      {"hydra", ExportFormat::kHydra},
      {"optuna-sqlite", ExportFormat::kOptunaSqlite},
      {"tensorboard", ExportFormat::kTensorboard}};
  std::vector<std::string> names;
  for (const auto& [text, format] : kFormats) {
    if (name == text) return format;
    names.push_back(text);
  }
  return Status::Invalid("--format: '", name, "' is not a format; expected ", Join(names, ", "));
}

namespace {

std::string YamlScalar(const Value& v) {
  std::string text = FormatValue(v);
  if (!std::holds_alternative<std::string>(v)) return text;
  // A string that YAML would read as something else (a number, a boolean, null) is quoted.
  nlohmann::json as_json = std::get<std::string>(v);
  bool plain = !text.empty() && !ParseDouble(text) &&
               text.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos && text != "true" &&
               text != "false" && text != "null" && text != "~" && text.front() != ' ' &&
               text.back() != ' ' && text.front() != '-';
  return plain ? text : as_json.dump();
}

// What `export` writes out: `trial` alone, or the best `top` completed trials.
Result<std::vector<const TrialRecord*>> ChosenTrials(const Loaded& l, const std::string& name,
                                                     int top, std::optional<int> trial) {
  if (trial) {
    for (const TrialRecord& t : l.trials)
      if (t.number == *trial) return std::vector<const TrialRecord*>{&t};
    return Status::NotFound("study '", name, "' has no trial ", *trial, " (it has ",
                            l.trials.size(), ")");
  }
  if (top < 1) return Status::Invalid("--top must be >= 1 (got ", top, ")");
  auto ranked = Ranked(l.study, l.trials);
  if (ranked.empty()) return Status::NotFound("study '", name, "' has no completed trial yet");
  if (static_cast<int>(ranked.size()) > top) ranked.resize(top);
  return ranked;
}

// A trial's parameters in the space's order.
Result<Params> OrderedParams(const TrialRecord& t) {
  HP_ASSIGN_OR_RETURN(Config c, ConfigFromJson(t.params_json));
  Params ordered;
  Json params = ParamsJson(t);
  for (const auto& [k, v] : params.items())
    if (auto it = c.find(k); it != c.end()) ordered.emplace_back(k, it->second);
  return ordered;
}

std::string ChosenValueText(const TrialRecord& t) {
  return t.value ? FormatDouble(*t.value) : StrCat("none (", TrialStateName(t.state), ")");
}

bool IsLauncher(ExportFormat f) {
  return f == ExportFormat::kDeepSpeed || f == ExportFormat::kTorchrun ||
         f == ExportFormat::kHuggingFace || f == ExportFormat::kLightning ||
         f == ExportFormat::kHydra;
}

// One trial in a launcher's format.
Status ExportLauncher(const Loaded& l, const TrialRecord& t, ExportFormat format, std::ostream& out,
                      std::ostream& warnings) {
  HP_ASSIGN_OR_RETURN(Params params, OrderedParams(t));
  LauncherOutput result;
  if (format == ExportFormat::kHydra) {
    result = HydraOverrides(params);
  } else {
    if (!l.spec)
      return Status::Invalid(
          "the stored study file no longer parses, so its export.roles are "
          "unknown; run the study once with this version");
    auto setup = ResolveSetup(params, l.spec->exports);
    if (!setup.ok()) return setup.status().WithContext(StrCat("trial ", t.number));
    switch (format) {
      case ExportFormat::kDeepSpeed:
        result = DeepSpeedConfig(*setup);
        NameWhatIsNotCarried(params, *setup, "--format deepspeed", &result);
        break;
      case ExportFormat::kHuggingFace:
        result = HuggingFaceArguments(*setup);
        NameWhatIsNotCarried(params, *setup, "--format hf", &result);
        break;
      case ExportFormat::kLightning:
        result = LightningTrainer(*setup);
        NameWhatIsNotCarried(params, *setup, "--format lightning", &result);
        break;
      default: {
        Config config(params.begin(), params.end());
        std::string command = study::RenderTemplate(l.spec->trial.command, config,
                                                    {{"trial_id", std::to_string(t.number)}});
        std::vector<std::string> names;
        for (const ParamSpec& p : l.spec->space.params()) names.push_back(p.name);
        command = ResolveParamVariables(command, params, names);
        result = TorchrunCommand(*setup, command, params);
      }
    }
  }
  out << result.text;
  for (const std::string& w : result.warnings) warnings << "warning: " << w << "\n";
  return Status::Ok();
}

// `--format args` prints --NAME VALUE; a study whose command took a parameter from its environment
// (HP_<NAME>, HYPERPACK_PARAMS_FILE: hyperpack-trainer, ${HP_X:-0}) and not as a placeholder may
// have a program that reads no such argument: said by name, with the formats that carry it.
void WarnUnplacedArgs(const Loaded& l, const std::vector<Params>& configs, std::ostream& warnings) {
  if (!l.spec || configs.empty()) return;
  auto placed = study::TemplatePlaceholders(l.spec->trial.command);
  if (!placed.ok()) return;
  std::vector<std::string> unplaced;
  for (const auto& [name, value] : configs.front())
    if (std::find(placed->begin(), placed->end(), name) == placed->end()) unplaced.push_back(name);
  if (unplaced.empty()) return;
  warnings << "warning: the study's command took " << Join(unplaced, ", ")
           << " from its environment, not as arguments: the program may read no --NAME for "
              "them; --format env or torchrun carries them as it got them\n";
}

// The plain formats: the configuration alone (`single`), or one entry per trial.
void ExportPlain(const Loaded& l, const std::vector<const TrialRecord*>& chosen,
                 const std::vector<Params>& configs, ExportFormat format, bool single,
                 std::ostream& out) {
  switch (format) {
    case ExportFormat::kJson: {
      if (single) {
        out << ParamsJson(*chosen.front()).dump(2) << "\n";
        break;
      }
      Json all = Json::array();
      for (const TrialRecord* t : chosen)
        all.push_back(Json{{"trial", t->number}, {"value", *t->value}, {"params", ParamsJson(*t)}});
      out << all.dump(2) << "\n";
      break;
    }
    case ExportFormat::kYaml:
      for (size_t i = 0; i < chosen.size(); ++i) {
        if (single) {
          out << "# study " << l.study.name << ", trial " << chosen[i]->number << ": "
              << l.study.metric << " = " << ChosenValueText(*chosen[i]) << "\n";
          for (const auto& [k, v] : configs[i]) out << k << ": " << YamlScalar(v) << "\n";
          continue;
        }
        out << "- trial: " << chosen[i]->number << "\n  value: " << ChosenValueText(*chosen[i])
            << "\n  params:\n";
        for (const auto& [k, v] : configs[i]) out << "    " << k << ": " << YamlScalar(v) << "\n";
      }
      break;
    case ExportFormat::kEnv:
      for (size_t i = 0; i < chosen.size(); ++i) {
        if (i) out << "\n";
        out << "# trial " << chosen[i]->number << ": " << l.study.metric << " = "
            << ChosenValueText(*chosen[i]) << "\n";
        for (const auto& [k, v] : configs[i])
          out << ParamEnvName(k) << "=" << ShellQuote(FormatValue(v)) << "\n";
        // As a trial gets them: a program that reads the parameters file's JSON (hyperpack-trainer)
        // reads this where it is given no file.
        out << env::kParams << "=" << ShellQuote(ParamsJson(*chosen[i]).dump()) << "\n";
      }
      break;
    case ExportFormat::kArgs:
      for (size_t i = 0; i < chosen.size(); ++i) {
        std::vector<std::string> parts;
        for (const auto& [k, v] : configs[i])
          parts.push_back("--" + k + " " + ShellQuote(FormatValue(v)));
        out << Join(parts, " ") << "\n";
      }
      break;
    default:
      break;  // the launchers' formats: ExportLauncher
  }
}

}  // namespace

Status ExportBest(Storage& db, const std::string& name, ExportFormat format, int top,
                  std::optional<int> trial, const std::optional<Tolerance>& within,
                  std::ostream& out, std::ostream& warnings) {
  HP_ASSIGN_OR_RETURN(Loaded l, Load(db, name));
  std::vector<const TrialRecord*> chosen;
  if (within) {
    if (trial || top != 1)
      return Status::Invalid(
          "--within picks one trial, the cheapest good one: it goes with "
          "neither --top nor --trial");
    auto ranked = Ranked(l.study, l.trials);
    if (ranked.empty()) return Status::NotFound("study '", name, "' has no completed trial yet");
    HP_ASSIGN_OR_RETURN(auto costs, LoadCosts(db, l));
    chosen = {CheapestWithin(ranked, costs, *within, Maximize(l.study))};
  } else {
    HP_ASSIGN_OR_RETURN(chosen, ChosenTrials(l, name, top, trial));
  }
  if (format == ExportFormat::kOptunaSqlite)
    return Status::Invalid("--format optuna-sqlite writes a database file: give -o FILE.db");
  if (format == ExportFormat::kTensorboard)
    return Status::Invalid("--format tensorboard writes a directory of logs: give -o DIR");
  if (IsLauncher(format)) {
    if (chosen.size() > 1)
      return Status::Invalid(
          "a launcher's format holds one configuration: use --top 1 (the "
          "default) or --trial N");
    return ExportLauncher(l, *chosen.front(), format, out, warnings);
  }
  std::vector<Params> configs;
  for (const TrialRecord* t : chosen) {
    HP_ASSIGN_OR_RETURN(Params p, OrderedParams(*t));
    configs.push_back(std::move(p));
  }
  ExportPlain(l, chosen, configs, format, /*single=*/top == 1 || trial.has_value(), out);
  if (format == ExportFormat::kArgs) WarnUnplacedArgs(l, configs, warnings);
  return Status::Ok();
}

}  // namespace hyperpack::report
