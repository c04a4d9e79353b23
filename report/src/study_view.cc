#include "study_view.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <list>
#include <mutex>

#include "hyperpack/host.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/pareto.h"
#include "hyperpack/tuner/recommend.h"

namespace hyperpack::report {

using nlohmann::json;
using storage::EventKind;
using storage::TrialRecord;
using storage::TrialState;

namespace {

constexpr EventKind kRuns[] = {EventKind::kTrialPaused, EventKind::kTrialResumed};

// The study `name` with its parsed file; kNotFound naming the closest study there is.
Result<StudyView> FindStudyView(storage::Storage& db, const std::string& name) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found) {
    HP_ASSIGN_OR_RETURN(auto all, db.ListStudies());
    std::vector<std::string> names;
    for (const auto& s : all) names.push_back(s.name);
    auto guess = DidYouMean(name, names);
    return Status::NotFound("no study named '", name, "' in ", db.path(),
                            guess ? "; did you mean '" + *guess + "'?" : std::string(""));
  }
  StudyView v;
  v.study = *found;
  v.spec = study::ParseStudy(v.study.spec_text, v.study.spec_path).spec;
  return v;
}

// StudyView::finalists, from the journal: only a study with finalists or rerun_top reads it.
Status ReadFinalists(storage::Storage& db, StudyView* v) {
  if (!v->spec || (v->spec->budget.finalists == 0 && v->spec->budget.rerun_top == 0))
    return Status::Ok();
  std::vector<storage::JournalEntry> journal = v->journal;
  if (journal.empty()) {
    HP_ASSIGN_OR_RETURN(journal, db.ListJournal(v->study.id));
  }
  for (const storage::JournalEntry& e : journal)
    if (e.kind == storage::JournalKind::kFinalist) v->finalists.insert(e.trial);
  HP_ASSIGN_OR_RETURN(std::vector<TrialRecord> all, db.ListTrials(v->study.id));
  for (const TrialRecord& t : all)  // by number: a re-run after the run it repeats
    if (t.retry_of && v->finalists.count(*t.retry_of)) v->finalists.insert(t.number);
  return Status::Ok();
}

}  // namespace

Result<StudyView> ReadStudySummary(storage::Storage& db, const std::string& name,
                                   const Tolerance& within) {
  HP_ASSIGN_OR_RETURN(StudyView v, FindStudyView(db, name));
  const int64_t id = v.study.id;
  // The tally first: a trial that ends between the reads is then counted as running and shown as
  // it ended, never missing from both.
  HP_ASSIGN_OR_RETURN(v.tally, db.TallyTrials(id));
  constexpr TrialState kOpen[] = {TrialState::kRunning, TrialState::kPaused};
  HP_ASSIGN_OR_RETURN(v.trials, db.ListTrialsIn(id, kOpen));
  std::vector<TrialRecord> best;
  const bool every_run = v.spec && v.spec->budget.rerun_top > 0;
  if (v.spec && (v.spec->KeepsValues() || v.spec->budget.finalists > 0 || every_run)) {
    // The best by value may break a constraint, a front is not the best value, with finalists
    // the best is a mean of runs, and with rerun_top a model's of them all: every completed trial.
    constexpr TrialState kDone[] = {TrialState::kCompleted};
    HP_ASSIGN_OR_RETURN(best, db.ListTrialsIn(id, kDone));
  } else {
    HP_ASSIGN_OR_RETURN(best, db.BestTrials(id, v.study.direction, std::nullopt, 1));
  }
  if (!best.empty() && !(v.spec && v.spec->KeepsValues()) && !every_run) {
    const double b = *best.front().value, slack = Slack(within, b);
    HP_ASSIGN_OR_RETURN(
        best, db.BestTrials(id, v.study.direction, Maximize(v.study) ? b - slack : b + slack, -1));
  }
  v.trials.insert(v.trials.end(), best.begin(), best.end());
  std::sort(v.trials.begin(), v.trials.end(),
            [](const TrialRecord& a, const TrialRecord& b) { return a.number < b.number; });
  HP_ASSIGN_OR_RETURN(v.events, db.ListEventsOfKinds(id, kRuns));
  HP_RETURN_IF_ERROR(ReadFinalists(db, &v));
  v.now = WallNow();
  return v;
}

storage::TrialTally Tally(const StudyView& view) {
  return view.tally ? *view.tally : storage::TallyOf(view.trials);
}

std::optional<double> StudyElapsed(const StudyView& view) {
  const storage::TrialTally tally = Tally(view);
  if (!tally.first_start) return std::nullopt;
  double end = tally.last_end.value_or(*tally.first_start);
  if (tally.running_on > 0) end = std::max(end, view.now);
  return std::max(0.0, end - *tally.first_start);
}

double Slack(const Tolerance& tolerance, double best) {
  return (tolerance.relative ? tolerance.amount * std::abs(best) : tolerance.amount) +
         1e-9 * std::max(1.0, std::abs(best));
}

Result<StudyView> ReadStudyView(storage::Storage& db, const std::string& name, ViewParts parts) {
  HP_ASSIGN_OR_RETURN(StudyView v, FindStudyView(db, name));
  HP_ASSIGN_OR_RETURN(v.trials, db.ListTrials(v.study.id));
  if (parts == ViewParts::kCosts) {
    HP_ASSIGN_OR_RETURN(v.events, db.ListEventsOfKinds(v.study.id, kRuns));
  } else if (parts == ViewParts::kEverything) {
    HP_ASSIGN_OR_RETURN(v.journal, db.ListJournal(v.study.id));
    // Every event: the timeline cuts trials at their pauses. The page itself shows the newest.
    HP_ASSIGN_OR_RETURN(v.events, db.ListEvents(v.study.id, std::numeric_limits<int>::max()));
  }
  HP_RETURN_IF_ERROR(ReadFinalists(db, &v));
  if (parts == ViewParts::kEverything) {
    for (int n : v.finalists) {
      HP_ASSIGN_OR_RETURN(v.finalist_metrics[n], db.TrialMetrics(v.study.id, n));
    }
  }
  v.now = WallNow();
  return v;
}

bool Maximize(const storage::StudyRecord& s) { return s.direction == Direction::kMaximize; }

namespace {

// The completed trials that may be the best, by number, as study/finalists.h takes them.
std::vector<study::CompletedRun> CandidateRuns(const StudyView& view) {
  std::vector<study::CompletedRun> runs;
  for (const TrialRecord& t : view.trials)
    if (t.state == TrialState::kCompleted && t.value &&
        study::MeetsConstraints(*view.spec, t.values))
      runs.push_back({t.number, t.params, *t.value, view.finalists.count(t.number) > 0});
  return runs;
}

// The re-runs repeated their first runs exactly (study::Repeats::Exact): the study's best is its
// best single run, as the run that chose it decided (study::ChooseBest).
bool ReRunsRepeat(const StudyView& view) {
  return view.spec && !view.finalists.empty() && study::FindRepeats(CandidateRuns(view)).Exact();
}

// Ranked before a choice moves one first: by value alone.
std::vector<const TrialRecord*> ByValue(const StudyView& view) {
  std::vector<const TrialRecord*> out;
  for (const TrialRecord& t : view.trials)
    if (t.state == TrialState::kCompleted && t.value &&
        (!view.spec || study::MeetsConstraints(*view.spec, t.values)))
      out.push_back(&t);
  const bool max = Maximize(view.study);
  std::stable_sort(out.begin(), out.end(), [&](const TrialRecord* a, const TrialRecord* b) {
    return max ? *a->value > *b->value : *a->value < *b->value;
  });
  return out;
}

// The trial number PickByModel chooses in a study with budget.rerun_top; nullopt where it cannot.
std::optional<int> RerunChoice(const StudyView& view) {
  if (!view.spec || view.spec->budget.rerun_top == 0 || ReRunsRepeat(view)) return std::nullopt;
  Result<ModelPick> pick = PickByModel(view);
  if (!pick.ok()) return std::nullopt;
  return pick->trial->number;
}

// The model's pick among `ranked` (ByValue's), or why there is none.
Result<std::pair<int, double>> FitRanked(const StudyView& view,
                                         const std::vector<const TrialRecord*>& ranked) {
  const std::string& name = view.study.name;
  std::vector<Config> configs;
  std::vector<double> values;  // lower is better
  const bool max = Maximize(view.study);
  for (const TrialRecord* t : ranked) {
    configs.push_back(t->params);
    values.push_back(max ? -*t->value : *t->value);
  }
  Result<tuner::Recommendation> rec = tuner::RecommendByModel(*view.space(), configs, values);
  if (!rec.ok())
    return Status(
        rec.status().code(),
        StrCat("--by-model: ", rec.status().message(), " (study '", name, "' has ", ranked.size(),
               " completed trials); `hyperpack best ", name, "` without it names the best run"));
  return std::pair(ranked[rec->index]->number, rec->noise_share);
}

// FitModelPick's answers by their inputs (the study, its file and every ranked run), the last
// kModelPickMemo of them: a fit of 300 runs takes about 1.5 s, and the dashboard's pages and
// `watch` read a study again every few seconds, mostly with no run completed since. Exact: an
// answer is a pure function of its key; keys over kModelPickKeyBytes (studies of many thousand
// runs, which `best --by-model` reads once) are not kept. Thread-safe (the dashboard makes pages on
// a pool); a fit runs outside the lock, so two readers of the same runs may both fit.
constexpr size_t kModelPickMemo = 8;
constexpr size_t kModelPickKeyBytes = size_t{1} << 20;
struct ModelPickMemo {
  std::mutex mu;
  std::list<std::pair<std::string, Result<std::pair<int, double>>>> answers;  // the latest first
  int64_t fits = 0;
};
ModelPickMemo& Memo() {
  static ModelPickMemo* memo = new ModelPickMemo;  // never destroyed: readers may outlive main
  return *memo;
}

std::string ModelPickKey(const StudyView& view, const std::vector<const TrialRecord*>& ranked) {
  std::string key = StrCat(view.study.name, '\x1f', view.study.spec_text, '\x1f');
  for (const TrialRecord* t : ranked)
    key += StrCat(t->number, ' ', FormatDouble(*t->value), ' ', storage::EncodeParams(t->params),
                  '\x1e');
  return key;
}

// PickByModel's fit: the trial number and the noise share, or why there is none.
Result<std::pair<int, double>> FitModelPick(const StudyView& view) {
  const std::string& name = view.study.name;
  if (view.spec && view.spec->MultiObjective())
    return Status::Invalid("--by-model recommends by one objective; study '", name,
                           "' has several (choose from its Pareto set with --pick CONDITIONS "
                           "--by METRIC)");
  if (!view.space())
    return Status::FailedPrecondition("--by-model: study '", name,
                                      "' has no study file it can read, so no search space");
  const std::vector<const TrialRecord*> ranked = ByValue(view);
  if (ranked.empty()) return Status::NotFound("study '", name, "' has no completed trial yet");
  const std::string key = ModelPickKey(view, ranked);
  const bool keep = key.size() <= kModelPickKeyBytes;
  ModelPickMemo& memo = Memo();
  if (keep) {
    std::lock_guard<std::mutex> lock(memo.mu);
    for (auto it = memo.answers.begin(); it != memo.answers.end(); ++it)
      if (it->first == key) {
        memo.answers.splice(memo.answers.begin(), memo.answers, it);
        return it->second;
      }
  }
  Result<std::pair<int, double>> answer = FitRanked(view, ranked);
  std::lock_guard<std::mutex> lock(memo.mu);
  ++memo.fits;
  if (keep) {
    memo.answers.emplace_front(key, answer);
    if (memo.answers.size() > kModelPickMemo) memo.answers.pop_back();
  }
  return answer;
}

}  // namespace

std::vector<const TrialRecord*> Ranked(const StudyView& view) {
  std::vector<const TrialRecord*> out = ByValue(view);
  // With finalists, the configuration with the best mean of its runs goes first; with
  // rerun_top, the model's pick.
  std::optional<int> first;
  if (std::optional<study::BestChoice> mean = BestByMean(view)) first = mean->trial;
  if (std::optional<int> pick = RerunChoice(view)) first = *pick;
  if (first) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const TrialRecord* t) { return t->number == *first; });
    if (it != out.end()) std::rotate(out.begin(), it, it + 1);
  }
  return out;
}

std::map<int, int> FinalistRepeats(const StudyView& view) {
  std::map<int, int> out;
  if (view.finalists.empty()) return out;
  std::map<std::string, int> first;
  for (const TrialRecord& t : view.trials) {
    auto [it, fresh] = first.emplace(storage::EncodeParams(t.params), t.number);
    if (!fresh && view.finalists.count(t.number)) out[t.number] = it->second;
  }
  return out;
}

std::vector<study::BestChoice> MeansByConfiguration(const StudyView& view) {
  if (!view.spec || view.spec->budget.finalists == 0 || view.spec->MultiObjective()) return {};
  return study::FinalistMeans(CandidateRuns(view), view.spec->objective);
}

std::optional<BestTrial> BestOf(const StudyView& view) {
  const std::vector<const TrialRecord*> ranked = Ranked(view);
  if (ranked.empty()) return std::nullopt;
  BestTrial best{*ranked.front(), *ranked.front()->value, 1};
  best.by_model = RerunChoice(view).has_value();
  best.reruns_repeat = ReRunsRepeat(view);
  if (std::optional<study::BestChoice> mean = BestByMean(view)) {
    best.value = mean->value;
    best.runs = mean->runs;
  }
  return best;
}

int64_t ModelPickFits() {
  std::lock_guard<std::mutex> lock(Memo().mu);
  return Memo().fits;
}

Result<ModelPick> PickByModel(const StudyView& view) {
  if (!view.model_pick) view.model_pick = FitModelPick(view);
  HP_ASSIGN_OR_RETURN(const auto pick, *view.model_pick);
  for (const TrialRecord& t : view.trials)
    if (t.number == pick.first) return ModelPick{&t, pick.second};
  return Status::Internal("trial ", pick.first, " is not in the view");
}

std::optional<study::BestChoice> BestByMean(const StudyView& view) {
  // study::ChooseBest's choice once a finalist has completed: the first of these.
  std::vector<study::BestChoice> means = MeansByConfiguration(view);
  if (means.empty() || means.front().runs < 2 || ReRunsRepeat(view)) return std::nullopt;
  return means.front();
}

std::optional<std::vector<double>> ObjectiveValues(const study::StudySpec& spec,
                                                   const TrialRecord& trial) {
  std::vector<double> out;
  for (const study::Objective& o : spec.objectives) {
    auto it = trial.values.find(o.metric);
    if (it == trial.values.end() || !std::isfinite(it->second)) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

std::vector<const TrialRecord*> ParetoSet(const StudyView& view) {
  std::vector<const TrialRecord*> out;
  if (!view.spec || !view.spec->MultiObjective()) return out;
  std::vector<const TrialRecord*> candidates;
  std::vector<tuner::ObjectiveVector> points;
  for (const TrialRecord& t : view.trials) {
    if (t.state != TrialState::kCompleted || !study::MeetsConstraints(*view.spec, t.values))
      continue;
    std::optional<std::vector<double>> v = ObjectiveValues(*view.spec, t);
    if (!v) continue;
    // Minimised, as pareto.h counts.
    for (size_t k = 0; k < v->size(); ++k)
      if (view.spec->objectives[k].direction == study::Direction::kMaximize) (*v)[k] = -(*v)[k];
    candidates.push_back(&t);
    points.push_back(std::move(*v));
  }
  if (points.empty()) return out;
  const std::vector<std::vector<int>> fronts = tuner::NonDominatedSort(points);
  for (int i : fronts.front()) out.push_back(candidates[i]);
  return out;
}

Segments RunSegments(const StudyView& view) {
  std::map<int, std::vector<const storage::EventRecord*>> by_trial;
  for (const storage::EventRecord& e : view.events)
    if (e.trial) by_trial[*e.trial].push_back(&e);
  Segments out;
  for (const TrialRecord& t : view.trials) {
    if (!t.started) continue;
    std::vector<std::pair<double, double>>& segments = out[t.number];
    double open = *t.started;
    bool running = true;
    for (const storage::EventRecord* e : by_trial[t.number]) {
      const std::optional<EventKind> kind = storage::ParseEventKind(e->kind);
      if (kind == EventKind::kTrialPaused && running) {
        segments.emplace_back(open, std::max(open, e->time));
        running = false;
      } else if (kind == EventKind::kTrialResumed && !running) {
        open = e->time;
        running = true;
      }
    }
    if (running) segments.emplace_back(open, std::max(open, t.ended.value_or(view.now)));
  }
  return out;
}

std::map<int, TrialCost> TrialCosts(const StudyView& view, const Segments& segments) {
  std::map<int, TrialCost> out;
  for (const TrialRecord& t : view.trials) {
    auto it = segments.find(t.number);
    if (it == segments.end()) continue;
    TrialCost& c = out[t.number];
    for (const auto& [start, end] : it->second) c.seconds += end - start;
    for (const storage::RankRecord& r : t.placement) {
      c.gpus += static_cast<int>(r.gpus.size());
      c.cpus += r.cpus;
      c.gpu_share += r.gpu_share;
    }
    const double units = c.gpu_share > 0 ? c.gpu_share : c.gpu() ? c.gpus : std::max(c.cpus, 1);
    c.cost = c.seconds * units;
  }
  return out;
}

std::map<int, TrialCost> TrialCosts(const StudyView& view) {
  return TrialCosts(view, RunSegments(view));
}

}  // namespace hyperpack::report
