// resources and export: what a trial holds, and the roles its parameters play (spec_parser.h).
#include "spec_parser.h"

#include "hyperpack/study/training.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

std::pair<std::string, double> SplitSizeUnit(const std::string& text) {
  static const std::pair<const char*, double> kUnits[] = {
      {"KiB", 1.0 / 1024},   {"MiB", 1},
      {"GiB", 1024},         {"TiB", 1024 * 1024},
      {"KB", 1e3 / 1048576}, {"MB", 1e6 / 1048576},
      {"GB", 1e9 / 1048576}, {"TB", 1e12 / 1048576}};
  std::string body = text;
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
  for (const auto& [unit, mib] : kUnits) {
    const size_t n = std::strlen(unit);
    if (body.size() > n && body.compare(body.size() - n, n, unit) == 0)
      return {body.substr(0, body.size() - n), mib};
  }
  return {body, 1};
}

void Parser::ParseResources(const Field& field, const SearchSpace& space, ResourceSpec* resources) {
  auto fields = Fields(field, "resources", {"gpus", "cpus", "gpu_memory"});
  auto expr = [&](const char* key, double* unit_mb) -> std::optional<Expression> {
    const Field* f = Get(fields, key);
    if (!f) return std::nullopt;
    std::string path = Path("resources", key);
    if (!f->value.IsScalar()) {
      Error(f->value.IsNull() ? f->key : f->value, path,
            unit_mb ? "expected a size such as 2GiB or 1500 (MiB), an expression such as "
                      "\"{batch_size} * 16 MiB\", or auto, got "
                    : "expected a number or an expression such as \"{data_parallel}\", got ",
            Describe(f->value));
      return std::nullopt;
    }
    std::string text = f->value.Scalar();
    if (unit_mb) std::tie(text, *unit_mb) = SplitSizeUnit(text);
    auto e = Expression::Parse(text);
    if (!e.ok()) {
      Error(f->value, path, e.status().message());
      return std::nullopt;
    }
    for (const std::string& ref : e->references()) {
      const ParamSpec* p = space.Find(ref);
      if (p == nullptr && declared_.count(ref)) return std::nullopt;  // already reported
      if (p == nullptr) {
        std::vector<std::string> names;
        for (const ParamSpec& q : space.params()) names.push_back(q.name);
        auto guess = DidYouMean(ref, names);
        Error(f->value, path, "'{", ref, "}' is not a parameter",
              guess ? "; did you mean '{" + *guess + "}'?" : std::string(""));
        return std::nullopt;
      }
      if (p->when) {
        Error(f->value, path, "'{", ref, "}' is conditional (", p->when->text,
              ") and has no value in some trials");
        return std::nullopt;
      }
    }
    if (e->references().empty()) {
      auto v = e->Evaluate({});
      if (!v.ok() || *v < 0) {
        Error(f->value, path, "must be >= 0");
        return std::nullopt;
      }
    }
    return *e;
  };
  resources->gpus = expr("gpus", nullptr);
  resources->cpus = expr("cpus", nullptr);
  const Field* memory = Get(fields, "gpu_memory");
  resources->gpu_memory_auto =
      memory && memory->value.IsScalar() && memory->value.Scalar() == "auto";
  if (!resources->gpu_memory_auto)
    resources->gpu_memory = expr("gpu_memory", &resources->gpu_memory_unit_mb);
  CheckGpuShare(fields, *resources);
}

// A share of a GPU is one rank's: gpus, where it is a constant, is a whole number, or a fraction
// below 1.
void Parser::CheckGpuShare(const std::map<std::string, Field>& fields,
                           const ResourceSpec& resources) {
  if (!resources.gpus || !resources.gpus->references().empty()) return;
  auto v = resources.gpus->Evaluate({});
  if (!v.ok()) return;
  const Field* f = Get(fields, "gpus");
  if (*v > 1 && *v != std::floor(*v)) {
    Error(f->value, "resources.gpus",
          "expected a whole number of GPUs, or a fraction below 1 to share one, got ",
          f->value.Scalar());
  } else if (*v >= 1 && (resources.gpu_memory || resources.gpu_memory_auto)) {
    Error(Get(fields, "gpu_memory")->value, "resources.gpu_memory",
          "packs trials that need less than a GPU onto one, and gpus: ", f->value.Scalar(),
          " gives each rank whole GPUs; leave out gpu_memory, or make gpus a fraction such as "
          "0.5");
  }
}

void Parser::ParseExport(const Field& field, const SearchSpace& space, ExportSpec* exports) {
  auto fields = Fields(field, "export", {"roles"}, /*list_allowed=*/true);
  const Field* f = Get(fields, "roles");
  if (!f) return;
  std::vector<std::string> names;
  for (TrainingRole role : kAllTrainingRoles) names.push_back(TrainingRoleName(role));
  for (const auto& [name, entry] : Fields(*f, "export.roles", names, /*list_allowed=*/true)) {
    // Fields() admitted only the roles' names. An init-capture: clang before 16 (the fuzzers'
    // compiler) cannot capture a structured binding itself.
    TrainingRole role =
        *std::find_if(std::begin(kAllTrainingRoles), std::end(kAllTrainingRoles),
                      [&key = name](TrainingRole r) { return key == TrainingRoleName(r); });
    std::string path = "export.roles." + name;
    auto value = ScalarValue(entry.value, entry.key, path);
    if (!value) continue;
    if (auto* text = std::get_if<std::string>(&*value); text && space.Find(*text)) {
      exports->roles[role] = RoleSource{*text, std::nullopt};
      continue;
    }
    if (std::string why = FixedRoleProblem(role, *value); !why.empty()) {
      std::vector<std::string> params;
      for (const ParamSpec& p : space.params()) params.push_back(p.name);
      Error(entry.value, path, "'", entry.value.Scalar(), "' is not a parameter of search_space (",
            Join(params, ", "), ") nor ", why);
      continue;
    }
    exports->roles[role] = RoleSource{"", *value};
  }
}

std::string Parser::FixedRoleProblem(TrainingRole role, const Value& value) {
  const double* d = std::get_if<double>(&value);
  const int64_t* i = std::get_if<int64_t>(&value);
  double number = d ? *d : i ? static_cast<double>(*i) : std::nan("");
  switch (role) {
    case TrainingRole::kMicroBatch:
    case TrainingRole::kGlobalBatch:
    case TrainingRole::kDataParallel:
    case TrainingRole::kAccumulation:
      return i && *i >= 1 ? "" : "a whole number >= 1";
    case TrainingRole::kWarmupSteps:
      return i && *i >= 0 ? "" : "a whole number >= 0";
    case TrainingRole::kWarmupRatio:
      return number >= 0 && number < 1 ? "" : "a fraction in [0, 1)";
    case TrainingRole::kLearningRate:
    case TrainingRole::kWeightDecay:
    case TrainingRole::kMomentum:
      return number >= 0 ? "" : "a number >= 0";
    case TrainingRole::kPrecision:
      return ParsePrecision(value) ? "" : "a precision: fp32, fp16 or bf16";
    case TrainingRole::kOptimizer:
      return ParseOptimizer(value) ? "" : "an optimizer: sgd, adam or adamw";
  }
  return "a valid value";
}

}  // namespace hyperpack::study::internal
