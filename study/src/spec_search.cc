// tuner, queue, pruner and budget (spec_parser.h).
#include "spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

void Parser::ParseTuner(const Field& field, TunerSpec* tuner) {
  auto fields = Fields(field, "tuner",
                       {"algorithm", "seed", "initial_trials", "acquisition", "warm_start",
                        "cost_aware", "random_fraction", "initial_full_trials"});
  using tuner::Acquisition;
  using tuner::TunerAlgorithm;
  OneOf(fields, "tuner", "algorithm",
        {TunerAlgorithm::kGp, TunerAlgorithm::kRandom, TunerAlgorithm::kSobol},
        tuner::TunerAlgorithmName, &tuner->algorithm);
  OneOf(fields, "tuner", "acquisition", {Acquisition::kEi, Acquisition::kUcb},
        tuner::AcquisitionName, &tuner->acquisition);
  if (auto* f = Get(fields, "seed")) {
    if (auto s = Integer(*f, "tuner.seed")) {
      if (*s < 0) {
        Error(f->value, "tuner.seed", "must be >= 0 (got ", *s, ")");
      } else {
        tuner->seed = static_cast<uint64_t>(*s);
      }
    }
  }
  if (auto* f = Get(fields, "initial_trials")) {
    if (auto n = Integer(*f, "tuner.initial_trials")) {
      if (*n < 1 || *n > 100000) {
        Error(f->value, "tuner.initial_trials", "must be between 1 and 100000 (got ", *n, ")");
      } else {
        tuner->initial_trials = static_cast<int>(*n);
      }
    }
  }
  if (auto* f = Get(fields, "warm_start")) {
    if (auto w = String(*f, "tuner.warm_start")) tuner->warm_start = *w;
  }
  if (auto* f = Get(fields, "cost_aware")) tuner->cost_aware = Bool(*f, "tuner.cost_aware");
  if (auto* f = Get(fields, "random_fraction")) {
    if (auto v = Number(*f, "tuner.random_fraction")) {
      if (!(*v >= 0 && *v <= 1)) {
        Error(f->value, "tuner.random_fraction",
              "must be a number from 0 to 1, the share of proposals drawn from the Sobol "
              "sequence instead of the model, e.g. 0.5 (got ",
              FormatDouble(*v), ")");
      } else {
        tuner->random_fraction = *v;
      }
    }
  }
  if (auto* f = Get(fields, "initial_full_trials")) {
    if (auto n = Integer(*f, "tuner.initial_full_trials")) {
      if (*n < 0 || *n > 100000) {
        Error(f->value, "tuner.initial_full_trials",
              "must be between 0 and 100000, the completed trials before the model proposes "
              "(0: from the initial design on) (got ",
              *n, ")");
      } else {
        tuner->initial_full_trials = static_cast<int>(*n);
      }
    }
  }
}

void Parser::ParseQueue(const Field& field, QueueSpec* queue) {
  auto fields = Fields(field, "queue", {"order", "aging", "max_wait"});
  if (!field.value.IsMap()) return;
  using scheduler::Order;
  if (Get(fields, "order")) {
    Order order = Order::kShortestFirst;  // overwritten, or the file has an error
    OneOf(fields, "queue", "order", {Order::kArrival, Order::kShortestFirst}, scheduler::OrderName,
          &order);
    queue->order = order;
  }
  if (auto* f = Get(fields, "aging")) {
    if (auto v = Number(*f, "queue.aging")) {
      if (!std::isfinite(*v) || *v < 0 || *v > 1e6) {
        Error(f->value, "queue.aging",
              "must be a number >= 0, the seconds of predicted run time forgiven per second "
              "waited, e.g. 1 (got ",
              FormatDouble(*v), ")");
      } else {
        queue->aging = *v;
      }
    }
  }
  if (auto* f = Get(fields, "max_wait")) {
    // 0 or none turns the starvation guard off.
    if (f->value.IsScalar() && (f->value.Scalar() == "0" || f->value.Scalar() == "none")) {
      queue->max_wait_s = 0;
    } else {
      queue->max_wait_s = Duration(*f, "queue.max_wait");
    }
  }
}

void Parser::ParsePruner(const Field& field, PrunerSpec* pruner) {
  auto fields = Fields(field, "pruner",
                       {"algorithm", "resource", "min_resource", "max_resource", "reduction_factor",
                        "mode", "warmup_steps", "startup_trials", "in_place", "probability"});
  if (!field.value.IsMap()) return;
  using tuner::PrunerAlgorithm;
  using tuner::PrunerMode;
  OneOf(fields, "pruner", "algorithm",
        {PrunerAlgorithm::kNone, PrunerAlgorithm::kMedian, PrunerAlgorithm::kAsha,
         PrunerAlgorithm::kHyperband, PrunerAlgorithm::kForecast},
        tuner::PrunerAlgorithmName, &pruner->algorithm);
  OneOf(fields, "pruner", "resource", {PrunerResource::kEpoch, PrunerResource::kStep}, ResourceName,
        &pruner->resource);
  OneOf(fields, "pruner", "mode", {PrunerMode::kStop, PrunerMode::kPromote}, tuner::PrunerModeName,
        &pruner->mode);
  CheckPrunerMode(fields, *pruner);
  auto number = [&](const char* key, double low, bool inclusive, const char* expected,
                    double* out) -> const Field* {
    const Field* f = Get(fields, key);
    if (!f) return nullptr;
    std::string path = Path("pruner", key);
    auto v = Number(*f, path);
    if (!v) return nullptr;
    if (!std::isfinite(*v) || (inclusive ? *v < low : *v <= low)) {
      Error(f->value, path, "must be ", expected, " (got ", FormatDouble(*v), ")");
      return nullptr;
    }
    *out = *v;
    return f;
  };
  number("min_resource", 0, false, "> 0", &pruner->min_resource);
  const Field* max = number("max_resource", 0, false, "> 0", &pruner->max_resource);
  number("reduction_factor", 1, false, "> 1, e.g. 3", &pruner->reduction_factor);
  number("warmup_steps", 0, true, ">= 0", &pruner->warmup_steps);
  if (const Field* f =
          number("probability", 0, false, "between 0 and 1, e.g. 0.05", &pruner->probability);
      f && pruner->probability >= 1) {
    Error(f->value, "pruner.probability", "must be between 0 and 1, e.g. 0.05 (got ",
          FormatDouble(pruner->probability), ")");
  }
  if (const Field* f = Get(fields, "startup_trials")) {
    if (auto n = Integer(*f, "pruner.startup_trials")) {
      if (*n < 0 || *n > 1000000) {
        Error(f->value, "pruner.startup_trials", "must be between 0 and 1000000 (got ", *n, ")");
      } else {
        pruner->startup_trials = static_cast<int>(*n);
      }
    }
  }
  if (const Field* f = Get(fields, "in_place")) {
    if (auto b = Bool(*f, "pruner.in_place")) pruner->in_place = *b;
  }
  CheckPrunerRungs(field, fields, max, *pruner);
  WarnUnreadPrunerFields(fields, pruner->algorithm);
}

void Parser::CheckPrunerMode(const std::map<std::string, Field>& fields, const PrunerSpec& pruner) {
  using tuner::PrunerAlgorithm;
  using tuner::PrunerMode;
  // Accepted and ignored, promote would leave a user expecting paused trials with none.
  if (const Field* f = Get(fields, "mode"); f && pruner.mode == PrunerMode::kPromote &&
                                            pruner.algorithm != PrunerAlgorithm::kAsha &&
                                            pruner.algorithm != PrunerAlgorithm::kHyperband) {
    Error(f->value, "pruner.mode",
          "promote pauses trials at their rungs and continues the best, which only asha and "
          "hyperband do; with algorithm ",
          tuner::PrunerAlgorithmName(pruner.algorithm),
          " nothing pauses: remove mode, or use algorithm: asha or hyperband");
  }
}

void Parser::WarnUnreadPrunerFields(const std::map<std::string, Field>& fields,
                                    tuner::PrunerAlgorithm algorithm) {
  using A = tuner::PrunerAlgorithm;
  // The fields only some algorithms read (pruner.h); the rest (resource, max_resource) all do.
  // mode is not here: promote without a pausing algorithm is an error (CheckPrunerMode), and stop
  // is what the rest do.
  const std::vector<std::pair<const char*, std::vector<A>>> readers_of = {
      {"min_resource", {A::kAsha, A::kHyperband, A::kForecast}},
      {"reduction_factor", {A::kAsha, A::kHyperband, A::kForecast}},
      {"in_place", {A::kAsha, A::kHyperband}},
      {"warmup_steps", {A::kMedian}},
      {"startup_trials", {A::kMedian, A::kForecast}},
      {"probability", {A::kForecast}},
  };
  for (const auto& [key, readers] : readers_of) {
    const Field* f = Get(fields, key);
    if (!f || std::find(readers.begin(), readers.end(), algorithm) != readers.end()) continue;
    std::string names = tuner::PrunerAlgorithmName(readers[0]);
    for (size_t i = 1; i < readers.size(); ++i)
      names +=
          StrCat(i + 1 < readers.size() ? ", " : " and ", tuner::PrunerAlgorithmName(readers[i]));
    Warning(f->key, Path("pruner", key), "only ", names, readers.size() > 1 ? " read" : " reads",
            " it; with algorithm ", tuner::PrunerAlgorithmName(algorithm), " it has no effect");
  }
}

void Parser::CheckPrunerRungs(const Field& field, const std::map<std::string, Field>& fields,
                              const Field* max, const PrunerSpec& spec) {
  const PrunerSpec* pruner = &spec;
  bool rungs = pruner->algorithm == tuner::PrunerAlgorithm::kAsha ||
               pruner->algorithm == tuner::PrunerAlgorithm::kHyperband ||
               pruner->algorithm == tuner::PrunerAlgorithm::kForecast;
  if (rungs && !Get(fields, "max_resource")) {
    Missing(field.key, "pruner", "max_resource",
            "the epochs (or steps) a full trial trains, e.g. max_resource: 27");
  } else if (rungs && max && pruner->max_resource <= pruner->min_resource) {
    Error(max->value, "pruner.max_resource", "must be greater than min_resource (",
          FormatDouble(pruner->min_resource), ")");
  }
}

void Parser::ParseBudget(const Field& field, BudgetSpec* budget) {
  auto fields = Fields(field, "budget",
                       {"max_trials", "max_parallel", "max_failed", "max_attempts", "time_limit",
                        "gpu_hours", "core_hours", "finalists", "rerun_top"});
  auto positive = [&](const char* key, int* out) {
    const Field* f = Get(fields, key);
    if (!f) return;
    std::string path = Path("budget", key);
    auto v = Integer(*f, path);
    if (!v) return;
    if (*v < 1 || *v > 1000000) {
      Error(f->value, path, "must be between 1 and 1000000 (got ", *v, ")");
      return;
    }
    *out = static_cast<int>(*v);
  };
  positive("max_trials", &budget->max_trials);
  positive("max_parallel", &budget->max_parallel);
  positive("max_failed", &budget->max_failed);
  positive("max_attempts", &budget->max_attempts);
  if (auto* f = Get(fields, "time_limit")) budget->time_limit_s = Duration(*f, "budget.time_limit");
  auto hours = [&](const char* key, std::optional<double>* out) {
    const Field* f = Get(fields, key);
    if (!f) return;
    std::string path = Path("budget", key);
    auto v = Number(*f, path);
    if (!v) return;
    if (!std::isfinite(*v) || *v <= 0 || *v > 1e9) {
      Error(f->value, path, "must be a number of hours > 0, e.g. 40 (got ", FormatDouble(*v), ")");
      return;
    }
    *out = *v;
  };
  hours("gpu_hours", &budget->gpu_hours);
  hours("core_hours", &budget->core_hours);
}

bool Parser::RerunsCanWork(const Field& f, const StudySpec& spec, const char* path) {
  if (spec.MultiObjective()) {
    Error(f.value, path,
          "re-runs the configurations with the best value, and this study has several "
          "objectives; remove it, or keep one objective");
    return false;
  }
  if (spec.trial.command.empty()) {
    Error(f.value, path,
          "is for trials the runner starts (trial.command), and this study's trials are asked "
          "for; run the best configurations again with hyperpack enqueue");
    return false;
  }
  return true;
}

void Parser::WarnOfAFixedSeed(const Field& f, const StudySpec& spec, const char* path) {
  // hyperpack-trainer seeds from --seed alone (0 without it); a script's seed is its own affair.
  std::istringstream words(spec.trial.command);
  std::string word, seed;
  if (!(words >> word) || word.substr(word.rfind('/') + 1) != "hyperpack-trainer") return;
  for (std::string previous; words >> word; previous = word) {
    if (previous == "--seed") seed = word;
    if (word.rfind("--seed=", 0) == 0) seed = word.substr(7);
  }
  if (seed.find("{trial}") != std::string::npos) return;
  Warning(f.value, path, "re-runs configurations, and hyperpack-trainer's seed is fixed (",
          seed.empty() ? "0, as the command passes no --seed" : "--seed " + seed,
          "), so a re-run repeats its first run and the re-runs end after two such repeats; "
          "pass --seed {trial} so that each run is another draw");
}

void Parser::ParseRerunTop(const Field& field, const StudySpec& spec, BudgetSpec* budget) {
  if (!field.value.IsMap() || !field.value["rerun_top"]) return;
  const Field f{field.value["rerun_top"], field.value["rerun_top"]};
  auto v = Integer(f, "budget.rerun_top");
  if (!v) return;
  if (*v < 0 || *v > 100) {
    Error(f.value, "budget.rerun_top",
          "must be between 0 and 100: a configuration that ranks among this many of the best "
          "single runs is trained once more, e.g. rerun_top: 5 (got ",
          *v, ")");
  } else if (*v > 0 && budget->finalists > 0) {
    Error(f.value, "budget.rerun_top",
          "and budget.finalists both train the best configurations again; give one (rerun_top "
          "re-runs each as it ranks, finalists at the end)");
  } else if (*v == 0 || RerunsCanWork(f, spec, "budget.rerun_top")) {
    budget->rerun_top = static_cast<int>(*v);
    if (*v > 0) WarnOfAFixedSeed(f, spec, "budget.rerun_top");
  }
}

void Parser::ParseFinalists(const Field& field, const StudySpec& spec, BudgetSpec* budget) {
  if (!field.value.IsMap() || !field.value["finalists"]) return;
  const Field f{field.value["finalists"], field.value["finalists"]};
  auto v = Integer(f, "budget.finalists");
  if (!v) return;
  if (*v < 0 || *v >= budget->max_trials) {
    Error(f.value, "budget.finalists", "must be between 0 and max_trials - 1 (",
          budget->max_trials - 1,
          "): the trials at the end that train the best configurations "
          "again (got ",
          *v, ")");
  } else if (*v == 0 || RerunsCanWork(f, spec, "budget.finalists")) {
    budget->finalists = static_cast<int>(*v);
    if (*v > 0) WarnOfAFixedSeed(f, spec, "budget.finalists");
    // The controller forgoes finalists that would hold more than a third of a time or cost budget;
    // those of max_trials are its last trials whatever their share, so a large one is said here.
    if (3 * *v > budget->max_trials)
      Warning(f.value, "budget.finalists", *v, " of max_trials ", budget->max_trials,
              " re-run more than a third of the trials: finalists holding that much of a budget "
              "cost more search than a second draw gave back on the learning-curve tables "
              "(docs/guide/early-stopping.md); raise max_trials or lower finalists");
  }
}

}  // namespace hyperpack::study::internal
