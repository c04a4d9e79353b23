// Every study file in examples/ x every format of `hyperpack export`: each parameter of the
// exported trial is carried (read back from the text the way the format's consumer reads it: a
// JSON key, a shell variable, an override, a launcher's field or the batch arithmetic) or a
// warning names it with its value. The trials are written to storage by hand (two per example:
// each categorical at its first value, then at its last), so no example is run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "hyperpack/config_json.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/study/template.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using Json = nlohmann::json;
using testing::RunCommand;
using testing::TempDir;

const char* const kFormats[] = {"json",      "yaml", "env",       "args", "torchrun",
                                "deepspeed", "hf",   "lightning", "hydra"};

std::vector<std::string> ExampleFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(HYPERPACK_SOURCE_DIR) / "examples"))
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Categoricals at their first (or last) value, numbers a third of the way up their range.
Config Pick(const SearchSpace& space, bool last) {
  Config c;
  for (const ParamSpec& p : space.params()) {
    if (!space.IsActive(p, c)) continue;
    const double t = 1.0 / 3.0;
    switch (p.type) {
      case ParamType::kFixed:
        c[p.name] = p.value;
        break;
      case ParamType::kCategorical:
        c[p.name] = last ? p.values.back() : p.values.front();
        break;
      case ParamType::kInt:
        c[p.name] = static_cast<int64_t>(p.low);
        break;
      case ParamType::kFloat:
        c[p.name] = p.log ? std::exp(std::log(p.low) + t * (std::log(p.high) - std::log(p.low)))
                          : p.low + t * (p.high - p.low);
        break;
    }
  }
  return c;
}

// Whether `text` (a value as a format wrote it) is `v`: numbers to 12 digits, text exactly.
bool Same(std::string text, const Value& v) {
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') &&
      text.back() == text.front())
    text = text.substr(1, text.size() - 2);
  if (auto n = ValueAsNumber(v); n && !std::holds_alternative<std::string>(v)) {
    char* end = nullptr;
    const double got = std::strtod(text.c_str(), &end);
    return end && *end == '\0' && !text.empty() && std::fabs(got - *n) <= 1e-12 * std::fabs(*n);
  }
  return text == FormatValue(v);
}

bool Same(const Json& j, const Value& v) {
  if (j.is_null()) return false;
  return Same(j.is_string() ? j.get<std::string>() : j.dump(), v);
}

// The text after `key` up to the end of its line or the next space.
std::string After(const std::string& text, const std::string& key, bool to_space = false) {
  size_t at = text.find(key);
  if (at == std::string::npos) return "\x01";  // matches no value
  at += key.size();
  const size_t end = text.find_first_of(to_space ? " \n" : "\n", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The words a POSIX shell makes of `line`: unquoted, single-quoted and double-quoted parts joined,
// a backslash escaping the next character outside single quotes. Enough for the exports' lines.
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\n' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      word += line.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i)
        word += line[i] == '\\' ? line[++i] : line[i];
      in_word = true;
    } else {
      word += c == '\\' ? line[++i] : c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// A Hydra override's value for `name` among the shell words of `text` ("\x01" when none): what
// follows "name=", its Hydra quotes kept for Same to take off.
std::string HydraValue(const std::string& text, const std::string& name) {
  for (const std::string& w : ShellWords(text))
    if (w.rfind(name + "=", 0) == 0) return w.substr(name.size() + 1);
  return "\x01";
}

Json ParamsInLine(const std::string& text) {
  std::string json = After(text, "HYPERPACK_PARAMS='");
  json = json.substr(0, json.find('\''));
  return Json::parse(json, nullptr, false);
}

double Num(const Json& j) { return j.is_number() ? j.get<double>() : NAN; }

// A launcher's form of the examples' parameters, read back: the value the text gives `name`, or
// null where the format has no place for it. `c` gives what the format itself does not hold
// (Hugging Face's data-parallel degree is the launcher's) for the batch arithmetic.
Json LauncherValue(const std::string& format, const std::string& text, const std::string& name,
                   const Config& c) {
  auto dp = [&] {
    return ValueAsNumber(c.count("data_parallel") ? c.at("data_parallel") : Value(int64_t{1}))
        .value();
  };
  if (format == "deepspeed") {
    Json j = Json::parse(text);
    Json opt = j.value("optimizer", Json::object());
    Json params = opt.value("params", Json::object());
    const double micro = Num(j["train_micro_batch_size_per_gpu"]);
    const double accum = Num(j["gradient_accumulation_steps"]);
    if (name == "learning_rate") return params.value("lr", Json());
    if (name == "batch_size") return j["train_batch_size"];
    if (name == "grad_accumulation") return j["gradient_accumulation_steps"];
    if (name == "data_parallel") return Num(j["train_batch_size"]) / (micro * accum);
    if (name == "precision")
      return j.contains("bf16") ? "bf16" : j.contains("fp16") ? "fp16" : "fp32";
    if (name == "optimizer" && opt.contains("type")) {
      std::string type = opt["type"];
      std::transform(type.begin(), type.end(), type.begin(), ::tolower);
      return type;
    }
    if (name == "momentum") return params.value("momentum", Json());
    if (name == "weight_decay") return params.value("weight_decay", Json());
    return Json();
  }
  if (format == "hf") {
    Json j = Json::parse(text);
    if (name == "learning_rate") return j.value("learning_rate", Json());
    if (name == "batch_size")
      return Num(j["per_device_train_batch_size"]) * Num(j["gradient_accumulation_steps"]) * dp();
    if (name == "grad_accumulation") return j["gradient_accumulation_steps"];
    if (name == "precision")
      return j.value("bf16", false) ? "bf16" : j.value("fp16", false) ? "fp16" : "fp32";
    if (name == "optimizer" && j.contains("optim")) return j["optim"] == "sgd" ? "sgd" : "adamw";
    if (name == "weight_decay") return j.value("weight_decay", Json());
    return Json();
  }
  // lightning: the lines of the trainer:, data: and model: blocks.
  auto field = [&](const std::string& key) { return After(text, "\n  " + key + ": ", true); };
  auto number = [&](const std::string& key) { return std::strtod(field(key).c_str(), nullptr); };
  if (name == "data_parallel") return field("devices");
  if (name == "grad_accumulation") return field("accumulate_grad_batches");
  if (name == "batch_size")
    return number("batch_size") * number("devices") * number("accumulate_grad_batches");
  if (name == "precision")
    return field("precision") == "\"bf16-mixed\"" ? "bf16"
           : field("precision") == "\"16-mixed\"" ? "fp16"
                                                  : "fp32";
  if (name == "learning_rate" && text.find("\n  learning_rate: ") != std::string::npos)
    return field("learning_rate");
  if (name == "weight_decay" && text.find("\n  weight_decay: ") != std::string::npos)
    return field("weight_decay");
  return Json();
}

// Whether `format`'s text gives parameter `name` its value `v`, as the format's consumer reads it.
bool Carries(const std::string& format, const std::string& text, const std::string& name,
             const Value& v, const Config& c) {
  if (format == "json") return Same(Json::parse(text)[name], v);
  if (format == "yaml") return Same(After(text, "\n" + name + ": "), v);
  if (format == "env")
    return Same(After(text, "\n" + study::ParamEnvName(name) + "="), v) &&
           Same(ParamsInLine(text)[name], v);
  if (format == "args") return Same(After(text, "--" + name + " ", true), v);
  if (format == "hydra") return Same(HydraValue(text, name), v);
  if (format == "torchrun")
    return Same(ParamsInLine(text)[name], v) &&
           Same(After(text, " " + study::ParamEnvName(name) + "=", true), v);
  return Same(LauncherValue(format, text, name, c), v);
}

class ExportMatrixTest : public ::testing::Test {
 protected:
  // A study of `file` with one completed trial of configuration `c`, as a run would store it.
  std::string Store(const std::string& file, const study::StudySpec& spec, const Config& c, int n) {
    auto db = storage::Storage::Open(db_).value();
    storage::StudyRecord s;
    s.name = spec.name + "-" + std::to_string(n);
    s.spec_text = testing::ReadFile(file);
    s.spec_path = file;
    s.direction = spec.objective.direction;
    s.metric = spec.objective.metric;
    s = db->CreateStudy(s).value();
    storage::TrialRecord t;
    t.study_id = s.id;
    t.state = storage::TrialState::kRunning;
    t.params = c;
    t.started = 1;
    EXPECT_TRUE(db->InsertTrial(t).ok());
    t.state = storage::TrialState::kCompleted;
    t.value = 0.5;
    t.ended = 2;
    EXPECT_TRUE(db->FinishTrial(t).ok());
    return s.name;
  }

  TempDir dir_;
  std::string db_ = dir_ / "m.db";
};

TEST_F(ExportMatrixTest, EveryExampleInEveryFormatCarriesEachParameterOrNamesIt) {
  const auto files = ExampleFiles();
  ASSERT_GE(files.size(), 5u);
  int n = 0;
  for (const std::string& file : files) {
    auto parsed = study::LoadStudyFile(file);
    ASSERT_TRUE(parsed.spec) << parsed.ErrorText();
    const study::StudySpec& spec = *parsed.spec;
    auto placed = study::TemplatePlaceholders(spec.trial.command);
    ASSERT_TRUE(placed.ok());
    for (bool last : {false, true}) {
      const Config c = Pick(spec.space, last);
      ASSERT_TRUE(spec.space.Validate(c).ok()) << file;
      const std::string name = Store(file, spec, c, n++);
      for (const char* format : kFormats) {
        SCOPED_TRACE(file + " --format " + format + " " + ConfigToJson(c));
        std::vector<std::string> args = {HYPERPACK_CLI, "export",    name, "--format",
                                         format,        "--storage", db_};
        // Several objectives have no best: the trial is chosen, as their users choose one.
        if (spec.MultiObjective()) args.insert(args.end(), {"--trial", "0"});
        auto out = RunCommand(args, dir_.path().string());
        ASSERT_EQ(out.exit_code, 0) << out.err;
        for (const auto& [param, v] : c) {
          const std::string named = param + " = " + FormatValue(v);
          const bool carried = Carries(format, out.out, param, v, c);
          const bool warned = out.err.find(named) != std::string::npos;
          EXPECT_TRUE(carried || warned) << param << " is neither carried nor named:\n"
                                         << out.out << out.err;
          // --NAME VALUE reaches a program that reads it: one whose command took the parameter
          // from its environment is told so by name.
          if (std::string(format) == "args" &&
              std::find(placed->begin(), placed->end(), param) == placed->end()) {
            EXPECT_THAT(out.err, ::testing::HasSubstr(param)) << out.err;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace hyperpack
