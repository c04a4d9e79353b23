// An Optuna study brought over as a hyperpack study, with its history: `hyperpack import
// optuna.db` (an RDB SQLite file) or `hyperpack import journal.log` (a JournalStorage file).
//
// OptunaStudy is what an Optuna storage holds of one study, in Optuna's own terms (each
// parameter's distribution JSON and internal value). report/'s ReadOptunaStorage reads one from a
// SQLite database of Optuna 3.0 to 5.x's schema; ParseOptunaJournal replays a journal file, as
// every release from 3.1 to 5.0 writes it. ImportOptunaStudy makes of it:
//   - a study file: its directions as objectives (named by study.set_metric_names where set, else
//     `value` or `value_0`, `value_1`, ...), each parameter's distributions across the trials as
//     one parameter of the search space (a conditional one with the `when:` that its trials
//     show), its constraints as metrics `constraint_NAME` with `max: 0`, the budget as the
//     imported trials and `more_trials` more;
//   - the trials to store: COMPLETE as completed (several values by metric), PRUNED as pruned at
//     its last step, FAIL as failed, each with its intermediate values as reports of the first
//     objective's metric and its times; WAITING (enqueued) as configurations to run first;
//     RUNNING ones are left out, with a warning (their processes are Optuna's).
// What cannot be carried over exactly is a warning; what cannot be carried over at all is an error
// that names the parameter or trial.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/direction.h"
#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::study {

enum class OptunaState { kRunning, kComplete, kPruned, kFail, kWaiting };
// Optuna's TrialState by its name ("COMPLETE") or its number (1), as its storages keep it.
std::optional<OptunaState> ParseOptunaState(const std::string& name);
std::optional<OptunaState> OptunaStateOf(int64_t number);

struct OptunaParam {
  std::string name;
  std::string distribution;  // Optuna's JSON: {"name": "FloatDistribution", "attributes": {...}}
  double internal = 0;       // the value in Optuna's internal form (a categorical's index)
};

struct OptunaTrial {
  int number = 0;
  OptunaState state = OptunaState::kRunning;
  std::vector<OptunaParam> params;  // in the order they were suggested
  std::vector<double> values;       // one per direction, where Optuna has them
  std::map<int64_t, double> intermediate;
  // By name: a constraints_func's list as "0", "1", ...; Trial.set_constraint's by their names.
  std::map<std::string, double> constraints;
  // Enqueued (WAITING): the parameters given to enqueue_trial, as JSON text of an object.
  std::string fixed_params;
  std::optional<double> started, ended;  // seconds since the epoch
};

struct OptunaStudy {
  std::string name;
  std::vector<Direction> directions;
  std::vector<std::string> metric_names;  // study.set_metric_names (Optuna 3.2 on); else empty
  std::vector<OptunaTrial> trials;        // by number
};

// The studies a JournalStorage file holds (deleted ones left out), replayed as Optuna replays it.
// `path` names the file in errors ("PATH:LINE: what is wrong").
Result<std::vector<OptunaStudy>> ParseOptunaJournal(const std::string& text,
                                                    const std::string& path);

// Which study of a storage to import: `wanted`, or the only one. Errors list the study names.
Result<OptunaStudy> ChooseOptunaStudy(std::vector<OptunaStudy> studies, const std::string& wanted,
                                      const std::string& path);

struct OptunaImportOptions {
  std::string source;                  // the file, for the study file's header comment
  std::optional<std::string> command;  // trial.command; none: an ask-and-tell study
  int more_trials = 20;                // the budget beyond the imported trials
};

// A trial of the imported history, ready to store.
struct ImportedTrial {
  enum class State { kCompleted, kPruned, kFailed };
  int optuna_number = 0;
  State state = State::kCompleted;
  Config params;
  std::optional<double> value;           // completed and pruned: the first objective's
  std::map<std::string, double> values;  // with several objectives or constraints: by metric
  std::vector<std::pair<int64_t, double>> reports;  // the first objective's, by step
  std::optional<double> started, ended;
};

struct OptunaImport {
  std::string study_yaml;
  std::vector<ImportedTrial> trials;
  std::vector<Config> waiting;  // enqueued configurations, to run first
  std::vector<std::string> warnings;
};

Result<OptunaImport> ImportOptunaStudy(const OptunaStudy& study,
                                       const OptunaImportOptions& options);

// A trial's system attribute as the storage keeps it (`value_json`: JSON as Python writes it, NaN
// and Infinity included) into `trial`: its constraints ("constraints", "constraints:NAME") and an
// enqueued trial's parameters ("fixed_params"); other keys are Optuna's own bookkeeping, passed
// over. An error says what the value holds where a number or an object belongs.
Status AddOptunaTrialAttr(const std::string& key, const std::string& value_json,
                          OptunaTrial* trial);
// A study's system attribute likewise: "study:metric_names" into `study`.
Status AddOptunaStudyAttr(const std::string& key, const std::string& value_json,
                          OptunaStudy* study);

// Whether `head` (a file's first bytes, or all of it) is an Optuna storage: SQLite's header, or a
// journal's first line ({"op_code": ...}).
bool LooksLikeOptunaStorage(const std::string& head);

// "2026-11-24 19:24:49.669821" (an RDB's DATETIME) or "2026-11-24T19:24:49.669821+00:00" (a
// journal's ISO time) as seconds since the epoch. Optuna writes naive times in local time before
// 5.0 and in UTC from 5.0 on; a naive time is read as UTC.
std::optional<double> ParseOptunaTime(const std::string& text);

}  // namespace hyperpack::study
