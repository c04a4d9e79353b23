// One study as a report command sees it: read from storage once per command (ReadStudyView), then
// rendered by the files beside it: the read commands' text and JSON (report.cc), exports
// (export.cc, optuna_export.cc, tensorboard_export.cc, launchers.cc), the study page's data
// (page_data.cc) and `status --watch` (watch.cc). What is derived from it (the ranking, each
// trial's runs, placement and cost) is computed here, from the view alone: no I/O, no clock (the
// reader sets `now`), so it is tested on records written by hand.
// Thread-safety: ReadStudyView as Storage, one thread per Storage; the rest are pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/report/report.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/finalists.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::report {

struct StudyView {
  storage::StudyRecord study;
  std::vector<storage::TrialRecord> trials;
  std::optional<study::StudySpec> spec;        // absent if the stored file no longer parses
  std::vector<storage::JournalEntry> journal;  // ViewParts::kEverything only
  // budget.finalists: the trials that trained a configuration again (the journal's finalists, and
  // their re-runs after an interruption). Empty for a study without finalists.
  std::set<int> finalists;
  // ViewParts::kEverything, a study with finalists: each finalist's stored metric points, which
  // the journal lacks (the pruner never hears of a finalist), for the page's curves.
  std::map<int, std::vector<storage::MetricPoint>> finalist_metrics;
  // Oldest first: the pauses and resumes that cut trials' runs (ViewParts::kCosts), or every event
  // (kEverything).
  std::vector<storage::EventRecord> events;
  double now = 0;     // seconds since the epoch: when it was read; running trials end here
  bool live = false;  // the dashboard serves it, and the page polls for more
  // PageImportance(*this) when a caller kept it from before (a GP fit takes a while); computed
  // when absent.
  std::optional<nlohmann::json> importance;
  // Set by ReadStudySummary, whose `trials` are only some of the study's: how many there are in
  // each state, and when they ran. Absent: `trials` are all of them (Tally counts them).
  std::optional<storage::TrialTally> tally;
  // PickByModel's answer (the trial number and noise share, or why not), fitted once per view
  // however many readers ask (a rerun_top study's BestOf and Ranked, best --by-model).
  mutable std::optional<Result<std::pair<int, double>>> model_pick;

  // The study's search space; null when its file no longer parses.
  const SearchSpace* space() const { return spec ? &spec->space : nullptr; }
};

// How much of a study a command reads: its record, trials and parsed file; with the events that
// its trials' costs need; or with the journal and every event as well (the study page).
enum class ViewParts { kTrials, kCosts, kEverything };

// Study `name` as `parts` says, at this moment; kNotFound naming the closest study there is.
Result<StudyView> ReadStudyView(storage::Storage& db, const std::string& name, ViewParts parts);

// What `status`, `status --watch` and `best` show, without reading every trial: the study's tally
// (TallyTrials), its running and paused trials, and its completed trials within `within` of the
// best (the best and any that tie it, for a zero tolerance), with the pause and resume events that
// their costs need (as kCosts).
Result<StudyView> ReadStudySummary(storage::Storage& db, const std::string& name,
                                   const Tolerance& within);

// view.tally, or the tally of view.trials where the view holds every trial.
storage::TrialTally Tally(const StudyView& view);
// Seconds from the first trial's start to the last end, or to view.now while a trial that started
// has not ended; nullopt before any trial started.
std::optional<double> StudyElapsed(const StudyView& view);
// How far from `best` a value may be and still be within `tolerance` of it (a hair more, so that
// 0.865 is within 0.001 of 0.866 though in doubles their difference is a little more).
double Slack(const Tolerance& tolerance, double best);

bool Maximize(const storage::StudyRecord& s);
// Completed trials with a value, best first (ties: the earlier trial). The pointers point into
// view.trials.
// In a study with constraints, only trials that meet them.
// The completed trials that meet the constraints, best value first (ties: the earlier). With
// budget.finalists the configuration with the best mean of its runs first (BestByMean); with
// budget.rerun_top the model's pick first (PickByModel), where it can be fitted.
std::vector<const storage::TrialRecord*> Ranked(const StudyView& view);
// With budget.finalists: each finalist, and the trial whose configuration it trains again (the
// first in view.trials with those parameters). Empty otherwise.
std::map<int, int> FinalistRepeats(const StudyView& view);
// A study with finalists: each configuration a completed finalist re-ran, as its first run with
// the mean of its runs, the best mean first (study::FinalistMeans). Empty otherwise.
std::vector<study::BestChoice> MeansByConfiguration(const StudyView& view);
// The trial `best` names (Ranked's first) and its value: with finalists, once a configuration has
// completed twice, its configuration's mean (BestByMean). nullopt before a trial has completed.
// Every reader of the single best calls this: the CLI, the page, Python.
std::optional<BestTrial> BestOf(const StudyView& view);
// A study with finalists, once a configuration has completed twice: the one with the best mean
// of its runs (study/finalists.h, as its run chose it); nullopt otherwise.
std::optional<study::BestChoice> BestByMean(const StudyView& view);

// `best --by-model`: of the completed trials that meet the constraints, the one whose
// configuration a Gaussian process fitted to all of them recommends (tuner/recommend.h: a noise
// term learnt, the best posterior mean among the five best single runs), beside the study's best.
// One training's value is a noisy draw; the model pools its neighbours' evidence. Errors: several
// objectives, too few completed trials, values all equal; each says what `best` without it names.
struct ModelPick {
  const storage::TrialRecord* trial = nullptr;
  double noise_share = 0;  // the share of the values' spread the model reads as noise
};
Result<ModelPick> PickByModel(const StudyView& view);
// The fits PickByModel has made in this process: a view of runs already fitted (the same study,
// study file and completed runs) is answered from memory. For tests.
int64_t ModelPickFits();

// A study with several objectives: its Pareto set, the completed trials that meet the
// constraints, have every objective's value, and that no other such trial dominates, in trial
// order. Empty for a study with one objective (or whose file no longer parses).
std::vector<const storage::TrialRecord*> ParetoSet(const StudyView& view);
// The member of view's Pareto set that `pick` chooses (report.h's FrontPick). Errors: the study
// has one objective, a metric it keeps no value of (with the ones it does), or no member meets the
// conditions (with each condition's metric's range on the front).
Result<const storage::TrialRecord*> PickFromFront(const StudyView& view, const FrontPick& pick);
// "val_accuracy>=0.9,latency_ms<20", as --pick is written.
std::string ConditionsText(const FrontPick& pick);

// Each objective's value of a trial of view.spec, in the order of its objectives; nullopt when
// one is missing.
std::optional<std::vector<double>> ObjectiveValues(const study::StudySpec& spec,
                                                   const storage::TrialRecord& trial);

// Each trial's stretches of running: [start, end] pairs, by trial number. A trial runs from its
// start until it pauses (a trial_paused event), again from each trial_resumed event, and finally
// until it ended (or `now`).
using Segments = std::map<int, std::vector<std::pair<double, double>>>;
Segments RunSegments(const StudyView& view);

// What a trial cost: the time it ran (its segments) x the GPUs it held, or x its CPU slots where
// it held no GPU (one slot where no placement was recorded). By trial number; a trial that never
// started has none.
struct TrialCost {
  double seconds = 0;
  int gpus = 0, cpus = 0;
  double cost = 0;       // GPU-seconds when gpus > 0 (a share: its part), else CPU-seconds
  double gpu_share = 0;  // > 0: the part of a GPU a share held (storage::RankRecord::gpu_share)
  bool gpu() const { return gpus > 0; }
};
std::map<int, TrialCost> TrialCosts(const StudyView& view);
std::map<int, TrialCost> TrialCosts(const StudyView& view, const Segments& segments);

}  // namespace hyperpack::report
