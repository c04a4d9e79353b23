// budget.finalists: the last trials of a budget train the best completed configurations again,
// out of the pruner's reach, and the study's best becomes the re-run configuration with the best
// mean of its runs (study/finalists.h chooses both).
//
// They are due once max_trials leaves room for them only, with a time limit once what is left of it
// is about the longest of their runs, or with a gpu_hours or core_hours budget once what the
// running trials leave of it is about what their runs cost; from then no trial is proposed or
// promoted, and each slot that frees takes the best configuration not chosen yet, as known at that
// moment. Once all are chosen, with a time limit, a slot that would stay idle until it trains a
// finalist's configuration a third time, where its run fits: the best mean so far first.
// Finalists that would hold more than a third of a time or cost budget are not started (Forgone):
// the search goes on, and the event log says why.
//
// budget.rerun_top (intensification, SMAC's word): from the 8th completed run, each configuration
// whose single run ranks among the best rerun_top trains once more as soon as a slot frees, before
// new proposals, out of the pruner's reach; the search goes on throughout.
//
// For both, two re-runs that return their first runs' values to the last digit, and none that
// differs, end the re-runs: the trainings have no noise to average (a fixed seed), the slots go
// back to the search, and the best is the best single run (study::ChooseBest).

#include <cmath>
#include <limits>

#include "controller_impl.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler {

using storage::EventKind;

namespace {
// A finalist's run may be slower than the run it repeats (a busier node, a process start): the
// time limit keeps this much more than the longest of them.
constexpr double kReserveMargin = 1.25;
// Finalists that would hold more of a time or cost budget than this take more from the search
// than a second draw gives back: on the learning-curve tables three finalists lowered the median
// retrained regret where their runs took about a quarter of the time limit, and raised it for 27
// of 30 (table, method) pairs where they took half (docs/BENCHMARKS.md, stop 91).
constexpr double kMaxFinalistShare = 1.0 / 3;
// budget.rerun_top: re-runs start once this many runs have completed (the model's choice needs as
// many; a top 5 of fewer is mostly the initial design's luck).
constexpr int kRerunAfter = 8;
}  // namespace

int StudyController::Impl::ProposalRoom(int free) const {
  if (spec_.budget.finalists == 0 || RerunsRepeat()) return free;
  // Once they are due, and once they are all chosen: a new trial could no longer be the best.
  if (FinalistsLeft() == 0 || FinalistsDue()) return 0;
  const int by_budget = options_.max_trials - finished_ - static_cast<int>(paused_.size()) - Busy();
  return std::max(0, std::min(free, by_budget - FinalistsLeft()));
}

bool StudyController::Impl::FinalistsDue() const {
  if (FinalistsLeft() == 0 || RerunsRepeat()) return false;
  const int by_budget = options_.max_trials - finished_ - static_cast<int>(paused_.size()) - Busy();
  if (by_budget <= FinalistsLeft() || proposals_exhausted_) return true;
  const study::BudgetSpec& b = spec_.budget;
  if (!b.time_limit_s && !b.gpu_hours && !b.core_hours) return false;
  std::optional<Reserve> reserve = FinalistReserve();
  return reserve && DueBy(*reserve) && !Forgone(*reserve);
}

bool StudyController::Impl::DueBy(const Reserve& reserve) const {
  const study::BudgetSpec& b = spec_.budget;
  // The cost budgets are read at events only, as they are enforced: a slot frees at an event.
  return (b.time_limit_s && now_ + reserve.seconds + 1e-9 >= *b.time_limit_s) ||
         (b.gpu_hours && CostLeft(true) <= reserve.gpu + 1e-9) ||
         (b.core_hours && CostLeft(false) <= reserve.cpu + 1e-9);
}

std::optional<std::string> StudyController::Impl::Forgone(const Reserve& reserve) const {
  const study::BudgetSpec& b = spec_.budget;
  if (b.time_limit_s && reserve.seconds > kMaxFinalistShare * *b.time_limit_s)
    return StrCat("their runs (", FormatShort(reserve.seconds, 3), " s with a margin) would hold ",
                  "more than a third of time_limit");
  if (b.gpu_hours && reserve.gpu > kMaxFinalistShare * *b.gpu_hours * 3600)
    return std::string("their runs would hold more than a third of gpu_hours");
  if (b.core_hours && reserve.cpu > kMaxFinalistShare * *b.core_hours * 3600)
    return std::string("their runs would hold more than a third of core_hours");
  return std::nullopt;
}

std::optional<StudyController::Impl::Reserve> StudyController::Impl::FinalistReserve() const {
  std::optional<Reserve> r;
  for (size_t i :
       study::NextFinalists(runs_, finalist_configs_, spec_.objective, FinalistsLeft())) {
    auto it = run_costs_.find(runs_[i].number);
    const RunCost c = it == run_costs_.end() ? RunCost{0, 0, false} : it->second;
    if (!r) r.emplace();
    r->seconds = std::max(r->seconds, c.seconds * kReserveMargin);
    (c.gpus ? r->gpu : r->cpu) += c.seconds * c.budget_units * kReserveMargin;
  }
  return r;
}

double StudyController::Impl::CostLeft(bool gpus) const {
  const std::optional<double>& hours = gpus ? spec_.budget.gpu_hours : spec_.budget.core_hours;
  double left = hours.value_or(0) * 3600 - SpentNow(gpus);
  const double expected = EstimateSeconds();
  for (const auto& [n, t] : running_)
    if (t.on_gpus == gpus) left -= std::max(0.0, expected - (now_ - t.started)) * t.budget_units;
  return left;
}

void StudyController::Impl::WakeForFinalists() {
  const std::optional<double>& limit = spec_.budget.time_limit_s;
  if (!limit || FinalistsLeft() == 0 || RerunsRepeat() || !run_.placing()) return;
  if (std::optional<Reserve> reserve = FinalistReserve();
      reserve && *limit - reserve->seconds > now_)
    Wake(*limit - reserve->seconds);
}

bool StudyController::Impl::CanPlaceMore() const {
  const int free = Free();
  if (free <= 0) return false;
  if (spec_.budget.finalists == 0 || ProposalRoom(free) > 0) return true;
  if (FinalistsLeft() == 0) return NextExtraDraw().has_value();
  return FinalistsDue() &&
         !study::NextFinalists(runs_, finalist_configs_, spec_.objective, 1).empty();
}

std::optional<size_t> StudyController::Impl::NextExtraDraw() const {
  const std::optional<double>& limit = spec_.budget.time_limit_s;
  if (!limit || spec_.budget.finalists == 0 || FinalistsLeft() > 0 || RerunsRepeat())
    return std::nullopt;
  // The configuration with the best mean of its completed runs so far goes first: a third draw
  // matters most to the one that would be chosen (ties: the order chosen).
  std::optional<std::pair<double, size_t>> next;
  for (size_t i = 0; i < finalist_configs_.size(); ++i) {
    const Config& c = finalist_configs_[i];
    if (std::find(extra_draws_.begin(), extra_draws_.end(), c) != extra_draws_.end()) continue;
    double longest = 0, sum = 0;
    int n = 0;
    for (const study::CompletedRun& r : runs_) {
      if (r.config != c) continue;
      auto it = run_costs_.find(r.number);
      if (it != run_costs_.end()) longest = std::max(longest, it->second.seconds);
      if (!std::isfinite(r.value)) continue;
      sum += r.value;
      ++n;
    }
    // No margin: a run that ends a little past the limit delays the study's end, as any trial
    // started before the limit does, and a slot left idle would learn nothing.
    if (n == 0 || now_ + longest > *limit) continue;
    const double mean = sum / n;
    if (!next || spec_.objective.Better(mean, next->first)) next.emplace(mean, i);
  }
  if (!next) return std::nullopt;
  return next->second;
}

int StudyController::Impl::QueueExtraDraws(int free) {
  for (; free > 0; --free) {
    std::optional<size_t> i = NextExtraDraw();
    if (!i) break;
    const Config& config = finalist_configs_[*i];
    extra_draws_.push_back(config);
    auto first = std::find_if(runs_.begin(), runs_.end(),
                              [&](const study::CompletedRun& r) { return r.config == config; });
    Queued q{config, 1, std::nullopt, std::nullopt, std::nullopt};
    q.finalist_of = first == runs_.end() ? std::nullopt : std::optional<int>(first->number);
    q.extra_draw = true;
    Enqueue(std::move(q));
  }
  return free;
}

int StudyController::Impl::QueueFinalists(int free) {
  if (spec_.budget.rerun_top > 0) return QueueReruns(free);
  if (RerunsRepeat()) {
    LogRepeats("no further finalist trains and the search goes on (budget.finalists)");
    return free;
  }
  if (spec_.budget.finalists > 0 && FinalistsLeft() == 0) return QueueExtraDraws(free);
  if (!FinalistsDue()) {
    NoteForgone();
    return free;
  }
  while (free > 0 && FinalistsLeft() > 0) {
    std::vector<size_t> next = study::NextFinalists(runs_, finalist_configs_, spec_.objective, 1);
    if (next.empty()) break;
    const study::CompletedRun& run = runs_[next.front()];
    finalist_configs_.push_back(run.config);
    Queued q{run.config, 1, std::nullopt, std::nullopt, std::nullopt};
    q.finalist_of = run.number;
    Enqueue(std::move(q));
    --free;
  }
  return FinalistsLeft() == 0 ? QueueExtraDraws(free) : 0;
}

int StudyController::Impl::QueueReruns(int free) {
  const std::optional<double>& limit = spec_.budget.time_limit_s;
  if (static_cast<int>(runs_.size()) < kRerunAfter) return free;
  if (RerunsRepeat()) {
    // Further re-runs would repeat their first runs: the slots go to the search.
    LogRepeats("no further configuration is re-run (budget.rerun_top)");
    return free;
  }
  // The best rerun_top configurations by their best single run: each not yet re-run, whose run
  // would end within the time limit, trains again, the best first.
  for (size_t i : study::NextFinalists(runs_, {}, spec_.objective, spec_.budget.rerun_top)) {
    if (free <= 0) break;
    const study::CompletedRun& run = runs_[i];
    if (std::find(finalist_configs_.begin(), finalist_configs_.end(), run.config) !=
        finalist_configs_.end())
      continue;
    auto cost = run_costs_.find(run.number);
    if (limit && cost != run_costs_.end() && now_ + cost->second.seconds > *limit) continue;
    finalist_configs_.push_back(run.config);
    Queued q{run.config, 1, std::nullopt, std::nullopt, std::nullopt};
    q.finalist_of = run.number;
    Enqueue(std::move(q));
    --free;
  }
  return free;
}

bool StudyController::Impl::NoteCompleted(int number, const Config& config, double value,
                                          bool finalist, const RunCost& cost) {
  // Without finalists the best is the best single run, the first of equals: kept as it comes,
  // without keeping every run.
  if (spec_.budget.finalists == 0) {
    // budget.rerun_top chooses what to re-run from every run so far; its best is the model's
    // (report's BestOf), not known here: the controller's is the best single run.
    if (spec_.budget.rerun_top > 0) {
      runs_.push_back({number, config, value, finalist});
      run_costs_[number] = cost;
      if (finalist) repeats_ = study::FindRepeats(runs_);
    }
    if (best_ && !spec_.objective.Better(value, *best_)) return false;
    best_ = value;
    best_trial_ = number;
    return true;
  }
  runs_.push_back({number, config, value, finalist});
  run_costs_[number] = cost;
  if (finalist) repeats_ = study::FindRepeats(runs_);
  std::optional<study::BestChoice> best = study::ChooseBest(runs_, spec_.objective);
  if (!best) return false;
  const bool changed = best_trial_ != best->trial || best_ != best->value;
  best_ = best->value;
  best_trial_ = best->trial;
  best_runs_ = best->runs;
  WakeForFinalists();
  if (best->trial == number) return true;
  // A finalist is the best where its configuration's mean is.
  auto first = std::find_if(runs_.begin(), runs_.end(),
                            [&](const study::CompletedRun& r) { return r.number == best->trial; });
  return changed && finalist && first != runs_.end() && first->config == config;
}

double StudyController::Impl::BeginRoot(int root, bool finalist) {
  if (finalist) finalist_roots_.insert(root);
  if (!IsFinalist(root)) {
    const double target = pruner_->Begin(root);
    Journal(storage::JournalKind::kBegin, root);
    return target;
  }
  // A finalist trains to the end: the pruner never hears of it.
  Journal(storage::JournalKind::kFinalist, root);
  return std::numeric_limits<double>::infinity();
}

void StudyController::Impl::LogRepeats(const char* outcome) {
  if (rerun_repeat_logged_) return;
  rerun_repeat_logged_ = true;
  const auto [rerun, first] = repeats_.same.back();
  Log(rerun, EventKind::kFinalist,
      StrCat("returned trial ", first, "'s value to the last digit, as trial ",
             repeats_.same.front().first, " did trial ", repeats_.same.front().second,
             "'s: the trainings repeat themselves (as with a fixed seed), so ", outcome));
}

void StudyController::Impl::NoteForgone() {
  if (forgone_logged_ || FinalistsLeft() == 0) return;
  const std::optional<Reserve> reserve = FinalistReserve();
  if (!reserve || !DueBy(*reserve)) return;
  const std::optional<std::string> why = Forgone(*reserve);
  if (!why) return;
  forgone_logged_ = true;
  Log(std::nullopt, EventKind::kFinalist,
      StrCat("no finalists: ", *why, "; the search goes on, and the best stays the best ",
             "single run unless the best configurations change to ones whose runs fit"));
}

void StudyController::Impl::LogFinalist(int number, int of, bool extra_draw) {
  if (spec_.budget.rerun_top > 0) {
    Log(number, EventKind::kFinalist,
        StrCat("trains trial ", of, "'s configuration again: it ranks among the best ",
               spec_.budget.rerun_top, " (budget.rerun_top; the pruner does not stop it)"));
    return;
  }
  if (extra_draw) {
    Log(number, EventKind::kFinalist,
        StrCat("trains trial ", of,
               "'s configuration a third time, in a slot otherwise idle "
               "until the time limit (the pruner does not stop it)"));
    return;
  }
  Log(number, EventKind::kFinalist,
      StrCat("trains trial ", of, "'s configuration again, a finalist ", finalist_configs_.size(),
             " of ", spec_.budget.finalists, " (the pruner does not stop it)"));
}

std::string StudyController::Impl::BestNote(bool is_best) const {
  if (!is_best) return "";
  if (best_runs_ <= 1) return "  (best so far)";
  return StrCat("  (best so far: the mean of ", best_runs_, " runs of trial ", *best_trial_,
                "'s configuration, ", FormatShort(*best_, 6), ")");
}

}  // namespace hyperpack::scheduler
