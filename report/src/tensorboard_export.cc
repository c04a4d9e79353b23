// `hyperpack export STUDY --format tensorboard -o DIR`: the study as TensorBoard logs, so that
// `tensorboard --logdir DIR` shows each trial's scalars and the HParams table of every trial's
// parameters against its metrics and its value.
//
// Layout, as TensorBoard's HParams plugin reads it: DIR/ holds the experiment (its parameters'
// domains and the metrics) in its own event file; DIR/trial-NNNN/ one run per trial, its session
// start (the trial's parameters), its metric points as scalars at their steps, the trial's value
// as `hyperpack/objective`, and its session end (success, failure or still running).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "hyperpack/config_json.h"
#include "hyperpack/report/report.h"
#include "hyperpack/tensorboard/events.h"
#include "hyperpack/text.h"
#include "study_view.h"

namespace hyperpack::report {
namespace {

namespace fs = std::filesystem;
namespace tb = hyperpack::tensorboard;

constexpr char kObjectiveTag[] = "hyperpack/objective";

// trial-0007: the trial's run, named as its folder of logs is.
std::string RunName(int number) {
  char name[32];
  std::snprintf(name, sizeof(name), "trial-%04d", number);
  return name;
}

tb::HParamValue TbValue(const Value& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

tb::HParamType TbType(const std::vector<Value>& values) {
  bool all_bool = true, all_number = true;
  for (const Value& v : values) {
    all_bool = all_bool && std::holds_alternative<bool>(v);
    all_number =
        all_number && (std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v));
  }
  return all_bool     ? tb::HParamType::kBool
         : all_number ? tb::HParamType::kFloat64
                      : tb::HParamType::kString;
}

// A parameter's row of the HParams table: a range's interval, a categorical's values.
tb::HParamInfo Info(const ParamSpec& p) {
  tb::HParamInfo info;
  info.name = p.name;
  std::vector<Value> values;
  switch (p.type) {
    case ParamType::kFloat:
    case ParamType::kInt:
      info.type = tb::HParamType::kFloat64;
      info.domain = tb::Interval{p.low, p.high};
      return info;
    case ParamType::kCategorical:
      values = p.values;
      break;
    case ParamType::kFixed:
      values = {p.value};
      break;
  }
  info.type = TbType(values);
  std::vector<tb::HParamValue> domain;
  for (const Value& v : values) domain.push_back(TbValue(v));
  info.domain = std::move(domain);
  return info;
}

tb::SessionStatus StatusOf(storage::TrialState state) {
  switch (state) {
    case storage::TrialState::kCompleted:
    case storage::TrialState::kPruned:
      return tb::SessionStatus::kSuccess;
    case storage::TrialState::kFailed:
    case storage::TrialState::kTimeout:
    case storage::TrialState::kInfeasible:
      return tb::SessionStatus::kFailure;
    case storage::TrialState::kRunning:
    case storage::TrialState::kPending:
    case storage::TrialState::kPaused:
      return tb::SessionStatus::kRunning;
    default:
      return tb::SessionStatus::kUnknown;
  }
}

// Writes `events` (serialized Events) framed, after the file version, as DIR/events.out.tfevents.
Status WriteEventFile(const fs::path& dir, double wall_time,
                      const std::vector<std::string>& events) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Io("cannot create ", dir.string(), ": ", ec.message());
  // TensorBoard reads files whose names contain "tfevents", newest name last.
  const fs::path file =
      dir / StrCat("events.out.tfevents.", static_cast<int64_t>(wall_time), ".hyperpack");
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << tb::FrameRecord(tb::EncodeFileVersionEvent(wall_time));
  for (const std::string& e : events) out << tb::FrameRecord(e);
  out.close();
  if (!out) return Status::Io("cannot write ", file.string());
  return Status::Ok();
}

// One trial's run: its session start, scalars by step, value and session end.
Result<std::vector<std::string>> TrialEvents(storage::Storage& db, const StudyView& l,
                                             const storage::TrialRecord& t,
                                             std::set<std::string>* metrics) {
  const Config& config = t.params;
  const double start = t.started.value_or(l.study.created);
  tb::SessionStart s;
  for (const auto& [name, v] : config) s.hparams[name] = TbValue(v);
  s.group_name = RunName(t.number);
  s.start_time_secs = start;
  std::vector<std::string> events = {tb::EncodeSessionStartEvent(s, start)};
  HP_ASSIGN_OR_RETURN(auto points, db.TrialMetrics(l.study.id, t.number));
  std::map<int64_t, std::pair<double, std::vector<tb::TaggedValue>>> by_step;
  for (const storage::MetricPoint& p : points) {
    if (!std::isfinite(p.value)) continue;
    auto& [time, values] = by_step[p.step];
    time = std::max(time, p.time);
    values.push_back({p.name, p.value});
    metrics->insert(p.name);
  }
  int64_t last_step = 0;
  for (const auto& [step, entry] : by_step) {
    events.push_back(tb::EncodeScalarsEvent(entry.first, step, entry.second));
    last_step = step;
  }
  const double end = t.ended.value_or(start);
  if (t.value && std::isfinite(*t.value)) {
    const tb::TaggedValue objective[] = {{kObjectiveTag, *t.value}};
    events.push_back(tb::EncodeScalarsEvent(end, last_step, objective));
  }
  events.push_back(tb::EncodeSessionEndEvent({StatusOf(t.state), end}, end));
  return events;
}

}  // namespace

Status ExportTensorboard(storage::Storage& db, const std::string& name, const std::string& dir) {
  HP_ASSIGN_OR_RETURN(StudyView l, ReadStudyView(db, name, ViewParts::kTrials));
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return Status::AlreadyExists(dir,
                                 " exists and is not empty; hyperpack writes TensorBoard "
                                 "logs only to a new or empty directory");
  std::set<std::string> metrics;
  for (const storage::TrialRecord& t : l.trials) {
    HP_ASSIGN_OR_RETURN(auto events, TrialEvents(db, l, t, &metrics));
    HP_RETURN_IF_ERROR(WriteEventFile(fs::path(dir) / RunName(t.number),
                                      t.started.value_or(l.study.created), events));
  }
  tb::Experiment experiment;
  experiment.name = l.study.name;
  experiment.time_created_secs = l.study.created;
  if (l.spec) {
    experiment.description = l.spec->description;
    for (const ParamSpec& p : l.spec->space.params()) experiment.hparam_infos.push_back(Info(p));
  }
  tb::MetricInfo objective;
  objective.tag = kObjectiveTag;
  objective.display_name = StrCat(l.study.metric, " (the trial's value)");
  experiment.metric_infos.push_back(objective);
  for (const std::string& m : metrics) {
    tb::MetricInfo info;
    info.tag = m;
    experiment.metric_infos.push_back(info);
  }
  return WriteEventFile(dir, l.study.created,
                        {tb::EncodeExperimentEvent(experiment, l.study.created)});
}

}  // namespace hyperpack::report
