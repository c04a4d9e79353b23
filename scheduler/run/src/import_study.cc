// ask_tell.h's StoreImportedStudy: a study made elsewhere, stored with its history.
#include <chrono>

#include "hyperpack/scheduler/ask_tell.h"
#include "hyperpack/text.h"
#include "study_store.h"

namespace hyperpack::scheduler {
namespace {

using storage::TrialRecord;
using storage::TrialState;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TrialState StateOf(study::ImportedTrial::State state) {
  switch (state) {
    case study::ImportedTrial::State::kCompleted:
      return TrialState::kCompleted;
    case study::ImportedTrial::State::kPruned:
      return TrialState::kPruned;
    case study::ImportedTrial::State::kFailed:
      break;
  }
  return TrialState::kFailed;
}

// The trials as stored rows, each configuration conformed to the space.
Result<std::vector<TrialRecord>> Records(const study::StudySpec& spec,
                                         const std::vector<study::ImportedTrial>& trials) {
  std::vector<TrialRecord> out;
  for (const study::ImportedTrial& t : trials) {
    auto conformed = spec.space.Conform(t.params);
    if (!conformed.ok())
      return Status::Invalid("Optuna's trial ", t.optuna_number,
                             " does not fit the study's space: ", conformed.status().message());
    TrialRecord r;
    r.number = static_cast<int>(out.size());
    r.state = StateOf(t.state);
    r.params = *std::move(conformed);
    r.value = t.value;
    r.values = t.values;
    r.started = t.started;
    r.ended = t.ended ? t.ended : t.started;
    r.host = "optuna";
    if (r.state == TrialState::kFailed)
      r.error = StrCat("failed in Optuna (its trial ", t.optuna_number, "), before the import");
    out.push_back(std::move(r));
  }
  return out;
}

// The enqueued configurations as enqueue controls, one each (as `hyperpack enqueue` keeps them).
Result<std::vector<storage::ControlRecord>> Queued(const study::StudySpec& spec,
                                                   const std::vector<Config>& waiting, double now) {
  std::vector<storage::ControlRecord> out;
  for (size_t i = 0; i < waiting.size(); ++i) {
    auto conformed = spec.space.Conform(waiting[i]);
    if (!conformed.ok())
      return Status::Invalid("enqueued configuration ", i + 1,
                             " does not fit the study's space: ", conformed.status().message());
    storage::ControlRecord c;
    c.kind = storage::ControlKind::kEnqueue;
    c.created = now;
    c.trials = {storage::ControlTrial{*std::move(conformed), std::nullopt, std::nullopt}};
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<StoredImport> StoreImportedStudy(storage::Storage& db, const study::StudySpec& spec,
                                        const std::vector<study::ImportedTrial>& trials,
                                        const std::vector<Config>& waiting) {
  const double now = Now();
  HP_ASSIGN_OR_RETURN(std::vector<TrialRecord> records, Records(spec, trials));
  HP_ASSIGN_OR_RETURN(std::vector<storage::ControlRecord> queued, Queued(spec, waiting, now));
  StoredImport out;
  out.queued = static_cast<int>(queued.size());
  HP_RETURN_IF_ERROR(db.Transaction([&]() -> Status {
    HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(spec.name));
    if (found)
      return Status::AlreadyExists("study '", spec.name, "' is stored in ", db.path(),
                                   " already; nothing was imported (delete it with hyperpack "
                                   "delete ",
                                   spec.name, " --yes, or import into another storage)");
    HP_ASSIGN_OR_RETURN(out.study, db.CreateStudy(NewStudyRecord(spec)));
    for (size_t i = 0; i < records.size(); ++i) {
      records[i].study_id = out.study.id;
      HP_RETURN_IF_ERROR(db.InsertTrial(records[i]));
      ++out.counts[records[i].state];
      std::vector<storage::MetricPoint> points;
      for (const auto& [step, v] : trials[i].reports)
        points.push_back({step, spec.objective.metric, v, records[i].ended.value_or(now)});
      if (!points.empty())
        HP_RETURN_IF_ERROR(db.AddMetrics(out.study.id, records[i].number, points));
    }
    for (const storage::ControlRecord& c : queued)
      HP_RETURN_IF_ERROR(db.AddControl(out.study.id, c).status());
    return db.AddEvent(out.study.id,
                       {now, std::nullopt, storage::EventKindName(storage::EventKind::kControl),
                        StrCat("imported: ", records.size(), " trials and ", queued.size(),
                               " queued configurations from Optuna")});
  }));
  return out;
}

}  // namespace hyperpack::scheduler
