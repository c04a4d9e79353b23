// cluster and its Slurm keys (spec_parser.h).
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

namespace {

enum class SlurmTime { kNotSlurm, kTooLong, kRead };

// A time as Slurm writes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS, into `seconds`.
SlurmTime ReadSlurmTime(const std::string& text, double* seconds) {
  std::string_view rest = text;
  std::optional<std::string_view> day_text;
  if (const size_t dash = rest.find('-'); dash != rest.npos) {
    day_text = rest.substr(0, dash);
    rest.remove_prefix(dash + 1);
    if (!IsDigits(*day_text)) return SlurmTime::kNotSlurm;
  }
  std::vector<std::string_view> numbers;  // after the days: one to three, split at ':'
  for (size_t colon = 0; colon != rest.npos;) {
    colon = rest.find(':');
    numbers.push_back(rest.substr(0, colon));
    if (colon != rest.npos) rest.remove_prefix(colon + 1);
  }
  if (numbers.size() > 3 || !std::all_of(numbers.begin(), numbers.end(), IsDigits))
    return SlurmTime::kNotSlurm;
  std::vector<double> parts;
  for (std::string_view number : numbers) {
    auto n = ParseInt(number);
    if (!n) return SlurmTime::kTooLong;
    parts.push_back(static_cast<double>(*n));
  }
  if (day_text) {  // D-HH, D-HH:MM, D-HH:MM:SS
    auto days = ParseInt(*day_text);
    if (!days) return SlurmTime::kTooLong;
    static const double kUnits[] = {3600, 60, 1};
    *seconds = static_cast<double>(*days) * 86400;
    for (size_t i = 0; i < parts.size(); ++i) *seconds += parts[i] * kUnits[i];
  } else if (parts.size() == 1) {  // MM
    *seconds = parts[0] * 60;
  } else if (parts.size() == 2) {  // MM:SS
    *seconds = parts[0] * 60 + parts[1];
  } else {  // HH:MM:SS
    *seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  return SlurmTime::kRead;
}

}  // namespace

void Parser::ParseCluster(const Field& field, ClusterSpec* cluster) {
  auto fields = Fields(field, "cluster", {"slurm"}, /*list_allowed=*/true);
  const Field* f = Get(fields, "slurm");
  if (!f) return;
  if (f->value.IsNull()) {
    Error(f->key, "cluster.slurm",
          "expected a mapping of keys to values, got nothing; for the cluster's defaults write "
          "slurm: {}");
    return;
  }
  SlurmSpec slurm;
  slurm.positions.push_back(Position(f->key, "cluster.slurm"));
  ParseSlurm(*f, "cluster.slurm", &slurm);
  cluster->slurm = std::move(slurm);
}

void Parser::ParseSlurm(const Field& field, const std::string& path, SlurmSpec* slurm) {
  static const std::vector<std::string> kKeys = {
      "partition",  "account",       "qos",           "constraint", "time_limit",
      "mem",        "cpus_per_task", "gpus_per_node", "gres",       "signal",
      "extra_args", "poll_interval", "pending_limit", "gpu_shards", "gpu_memory"};
  auto fields = Fields(field, path, kKeys, /*list_allowed=*/true);
  for (const std::string& name : kKeys) {
    if (const Field* f = Get(fields, name))
      slurm->positions.push_back(
          Position(f->value.IsNull() ? f->key : f->value, "cluster.slurm." + name));
  }
  auto text = [&](const char* key, std::string* out) {
    if (const Field* f = Get(fields, key)) {
      if (auto v = String(*f, Path(path, key))) *out = *v;
    }
  };
  text("partition", &slurm->partition);
  text("account", &slurm->account);
  text("qos", &slurm->qos);
  text("constraint", &slurm->constraint);
  if (const Field* f = Get(fields, "time_limit"))
    slurm->time_limit_s = TimeLimit(*f, Path(path, "time_limit"));
  if (const Field* f = Get(fields, "mem")) {
    if (auto m = Memory(*f, Path(path, "mem"))) slurm->mem = *m;
  }
  auto count = [&](const char* key, int* out) {
    const Field* f = Get(fields, key);
    if (!f) return;
    std::string key_path = Path(path, key);
    auto v = Integer(*f, key_path);
    if (!v) return;
    if (*v < 1 || *v > 1000000) {
      Error(f->value, key_path, "must be between 1 and 1000000 (got ", *v, ")");
      return;
    }
    *out = static_cast<int>(*v);
  };
  count("cpus_per_task", &slurm->cpus_per_task);
  count("gpus_per_node", &slurm->gpus_per_node);
  if (const Field* f = Get(fields, "gres")) {
    if (auto g = Bool(*f, Path(path, "gres"))) slurm->gres = *g;
  }
  if (const Field* f = Get(fields, "signal")) {
    if (auto s = Signal(*f, Path(path, "signal"))) slurm->signal = *s;
  }
  if (const Field* f = Get(fields, "extra_args"))
    slurm->extra_args = ExtraArgs(*f, Path(path, "extra_args"));
  ParseSlurmWaits(fields, path, slurm);
  ParseSlurmShards(fields, path, slurm);
}

void Parser::ParseSlurmShards(const std::map<std::string, Field>& fields, const std::string& path,
                              SlurmSpec* slurm) {
  if (const Field* f = Get(fields, "gpu_shards")) {
    const std::string key = Path(path, "gpu_shards");
    if (auto v = Integer(*f, key)) {
      if (*v < 1 || *v > 1000000)
        Error(f->value, key, "must be between 1 and 1000000 (got ", *v,
              "): the shards each GPU has in the cluster's gres.conf (Name=shard Count=...)");
      else
        slurm->gpu_shards = static_cast<int>(*v);
    }
  }
  if (const Field* f = Get(fields, "gpu_memory")) {
    const std::string key = Path(path, "gpu_memory");
    std::optional<double> mib;
    if (f->value.IsScalar()) {
      auto [number, unit] = SplitSizeUnit(f->value.Scalar());
      if (auto n = ParseDouble(Trim(number)); n && *n * unit >= 1 && *n * unit <= 1e12)
        mib = *n * unit;
    }
    if (mib)
      slurm->gpu_memory_mb = static_cast<int64_t>(*mib);
    else
      Error(f->value.IsNull() ? f->key : f->value, key,
            "expected each GPU's memory as a size such as 80GiB or 81920 (MiB), got ",
            Describe(f->value));
  }
}

void Parser::ParseSlurmWaits(const std::map<std::string, Field>& fields, const std::string& path,
                             SlurmSpec* slurm) {
  if (const Field* f = Get(fields, "poll_interval")) {
    std::string key = Path(path, "poll_interval");
    if (auto d = Duration(*f, key)) {
      if (*d < 0.2) {
        Error(f->value, key, "must be at least 0.2s (got ", FormatDouble(*d), "s)");
      } else {
        slurm->poll_s = *d;
      }
    }
  }
  if (const Field* f = Get(fields, "pending_limit")) {
    if (auto d = Duration(*f, Path(path, "pending_limit"))) slurm->pending_limit_s = *d;
  }
}

std::optional<std::string> Parser::Memory(const Field& f, const std::string& key) {
  bool ok = f.value.IsScalar();
  if (ok) {
    const std::string& v = f.value.Scalar();
    size_t digits = 0;
    while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
    const size_t rest = v.size() - digits;
    ok = digits > 0 && (rest == 0 || (rest == 1 && std::strchr("KMGT", v.back()) != nullptr));
  }
  if (ok) return f.value.Scalar();
  Error(f.value.IsNull() ? f.key : f.value, key,
        f.value.IsScalar() ? "'" + f.value.Scalar() + "' is not an amount of memory"
                           : "expected an amount of memory, got " + Describe(f.value),
        "; write it as Slurm does, e.g. 16G, 512M or 4000 (megabytes)");
  return std::nullopt;
}

std::vector<std::string> Parser::ExtraArgs(const Field& f, const std::string& key) {
  std::vector<std::string> args;
  if (!f.value.IsSequence()) {
    Error(f.value.IsNull() ? f.key : f.value, key,
          "expected a list of sbatch options such as [--exclusive], got ", Describe(f.value));
    return args;
  }
  for (YAML::Node item : f.value) {
    if (!item.IsScalar() || item.Scalar().empty() || item.Scalar()[0] != '-') {
      Error(item, key, Describe(item),
            " is not an sbatch option; each item starts with '-' and holds its value too, "
            "e.g. --exclusive or --nodelist=n01");
      continue;
    }
    args.push_back(item.Scalar());
  }
  return args;
}

std::optional<double> Parser::TimeLimit(const Field& f, const std::string& path) {
  static const std::string kExpected =
      "expected e.g. 2h, 90m or 1h30m, or as Slurm writes it: 90 (minutes), 1:30:00 or "
      "1-12:00:00";
  if (!f.value.IsScalar()) {
    Error(f.value.IsNull() ? f.key : f.value, path, kExpected, ", got ", Describe(f.value));
    return std::nullopt;
  }
  const std::string& text = f.value.Scalar();
  double seconds = 0;
  switch (ReadSlurmTime(text, &seconds)) {
    case SlurmTime::kTooLong:
      Error(f.value, path, "'", text, "' is too long a time limit");
      return std::nullopt;
    case SlurmTime::kRead:
      if (seconds > 0) return seconds;
      Error(f.value, path, "must be > 0 (got ", text,
            "); leave time_limit out for the partition's default");
      return std::nullopt;
    case SlurmTime::kNotSlurm:
      break;
  }
  if (auto x = ParseDouble(text)) {
    if (*x <= 0) {
      Error(f.value, path, "must be > 0 (got ", text,
            "); leave time_limit out for the partition's default");
    } else {
      Error(f.value, path, "'", text,
            "' is not a time limit: a bare number is whole minutes, as Slurm reads it; ",
            kExpected);
    }
    return std::nullopt;
  }
  auto d = ParseDuration(text);
  if (!d.ok()) {
    Error(f.value, path, "'", text, "' is not a time limit; ", kExpected);
    return std::nullopt;
  }
  return *d;
}

std::optional<std::string> Parser::Signal(const Field& f, const std::string& path) {
  static const std::string kExpected =
      "expected [B:]NAME@SECONDS such as USR1@90 or B:SIGUSR1@120, or false for no signal";
  if (!f.value.IsScalar()) {
    Error(f.value.IsNull() ? f.key : f.value, path, kExpected, ", got ", Describe(f.value));
    return std::nullopt;
  }
  const std::string& text = f.value.Scalar();
  if (text.empty() || text == "none" || text == "false" || text == "False" || text == "FALSE")
    return std::string();
  // [B:]NAME@SECONDS, NAME a signal's name (USR1) or number (10).
  std::string_view rest = text;
  if (rest.starts_with("B:")) rest.remove_prefix(2);
  const size_t at = rest.find('@');
  const std::string_view signal = rest.substr(0, at);
  const std::string_view ahead = at == rest.npos ? "" : rest.substr(at + 1);
  constexpr std::string_view kUpperCase = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  const CharSet upper = {.letters = false, .digits = false, .others = kUpperCase};
  const bool named = IsToken(signal, upper, {.letters = false, .others = kUpperCase});
  if (!(named || IsDigits(signal)) || !IsDigits(ahead)) {
    Error(f.value, path, "'", text, "' is not a signal; ", kExpected);
    return std::nullopt;
  }
  auto seconds = ParseInt(ahead);
  if (!seconds || *seconds > 65535) {
    Error(f.value, path, "the warning must come at most 65535 seconds ahead (got ", ahead, ")");
    return std::nullopt;
  }
  return text;
}

}  // namespace hyperpack::study::internal
