#include "config.h"

#include <cmath>
#include <cstdlib>
#include <cxxopts.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"

namespace hyperpack::trainer {
namespace {

using Json = nlohmann::json;

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    auto v = ParseInt(item);
    if (!v || *v <= 0) return {};
    out.push_back(*v);
  }
  return out;
}

// The value parsers of Set: a number, text (one of `allowed` unless that is empty), a boolean
// and a list of sizes; each accepts its value as JSON or as a flag's text.
template <typename T>
Status SetNumber(const std::string& key, const Json& v, T* out) {
  if (v.is_number()) {
    *out = v.get<T>();
    return Status::Ok();
  }
  if (v.is_string()) {
    auto d = ParseDouble(v.get<std::string>());
    if (d) {
      *out = static_cast<T>(*d);
      return Status::Ok();
    }
  }
  return Status::Invalid(key, ": expected a number, got ", v.dump());
}

// Any text: a path or a column name. A number or list is taken as its JSON text.
Status SetString(const Json& v, std::string* out) {
  *out = v.is_string() ? v.get<std::string>() : v.dump();
  return Status::Ok();
}

// One of a closed set of names, each standing for an enum value.
template <typename E>
struct Choice {
  const char* text;
  E value;
};
template <typename E, size_t N>
Status SetChoice(const std::string& key, const Json& v, E* out, const Choice<E> (&names)[N]) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  std::vector<std::string> all;
  for (const Choice<E>& n : names) {
    if (s == n.text) {
      *out = n.value;
      return Status::Ok();
    }
    all.push_back(n.text);
  }
  return Status::Invalid(key, ": '", s, "' is not one of ", Join(all, ", "));
}

constexpr Choice<ModelKind> kModels[] = {
    {"mlp", ModelKind::kMlp}, {"cnn", ModelKind::kCnn}, {"charlm", ModelKind::kCharLm}};
constexpr Choice<DataKind> kData[] = {
    {"fmnist", DataKind::kFmnist}, {"csv", DataKind::kCsv}, {"text", DataKind::kText}};
constexpr Choice<LrScaling> kLrScalings[] = {
    {"none", LrScaling::kNone}, {"linear", LrScaling::kLinear}, {"sqrt", LrScaling::kSqrt}};
constexpr Choice<Schedule> kSchedules[] = {
    {"cosine", Schedule::kCosine}, {"constant", Schedule::kConstant}, {"step", Schedule::kStep}};
constexpr Choice<OptimizerKind> kOptimizers[] = {{"sgd", OptimizerKind::kSgd},
                                                 {"adamw", OptimizerKind::kAdamW}};
template <typename E, size_t N>
const char* NameOf(E value, const Choice<E> (&names)[N]) {
  for (const Choice<E>& n : names)
    if (n.value == value) return n.text;
  return "?";
}
constexpr Choice<Precision> kPrecisions[] = {
    {"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}, {"fp16", Precision::kFp16}};
constexpr Choice<GradCompression> kCompressions[] = {{"none", GradCompression::kNone},
                                                     {"fp16", GradCompression::kFp16},
                                                     {"bf16", GradCompression::kBf16},
                                                     {"int8", GradCompression::kInt8}};
constexpr Choice<DeviceChoice> kDevices[] = {
    {"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}};

// auto, none, dynamic, or a number > 0: a static scale.
Status SetLossScale(TrainerConfig& c, const std::string& key, const Json& v) {
  constexpr Choice<LossScaleMode> kModes[] = {{"auto", LossScaleMode::kAuto},
                                              {"none", LossScaleMode::kNone},
                                              {"dynamic", LossScaleMode::kDynamic}};
  double scale = 0;
  if (SetNumber(key, v, &scale).ok()) {
    if (!(scale > 0) || !std::isfinite(scale))
      return Status::Invalid(key, ": a static loss scale must be a number > 0, got ", v.dump());
    c.loss_scale = LossScaleMode::kStatic;
    c.static_loss_scale = scale;
    return Status::Ok();
  }
  Status s = SetChoice(key, v, &c.loss_scale, kModes);
  if (!s.ok()) return Status::Invalid(s.message(), ", or a static scale > 0");
  return s;
}

Status SetFlag(const std::string& key, const Json& v, bool* out) {
  if (v.is_boolean()) {
    *out = v.get<bool>();
    return Status::Ok();
  }
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s == "true" || s == "1") {
    *out = true;
  } else if (s == "false" || s == "0") {
    *out = false;
  } else {
    return Status::Invalid(key, ": expected true or false, got ", s);
  }
  return Status::Ok();
}

Status SetList(const std::string& key, const Json& v, std::vector<int64_t>* out) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (v.is_array()) {
    s.clear();
    for (const auto& e : v) s += (s.empty() ? "" : ",") + e.dump();
  }
  auto l = ParseList(s);
  if (l.empty()) return Status::Invalid(key, ": expected sizes like 256,128, got ", s);
  *out = l;
  return Status::Ok();
}

// One setter per kind of value, for a member of the config.
using Setter = Status (*)(TrainerConfig&, const std::string& key, const Json&);
template <auto M>
Status Number(TrainerConfig& c, const std::string& key, const Json& v) {
  return SetNumber(key, v, &(c.*M));
}
template <auto M>
Status Text(TrainerConfig& c, const std::string& key, const Json& v) {
  return SetString(v, &(c.*M));
}
template <auto M>
Status Flag(TrainerConfig& c, const std::string& key, const Json& v) {
  return SetFlag(key, v, &(c.*M));
}
template <auto M>
Status List(TrainerConfig& c, const std::string& key, const Json& v) {
  return SetList(key, v, &(c.*M));
}

// Every key the trainer takes, in --help's order: each is a key of the parameter file and a flag
// (FlagName); `boolean` flags may stand alone.
struct Key {
  const char* name;
  Setter set;
  bool boolean = false;
};
using C = TrainerConfig;
const Key kKeys[] = {
    {"model",
     [](C& c, const std::string& k, const Json& v) { return SetChoice(k, v, &c.model, kModels); }},
    {"model_file", Text<&C::model_file>},
    {"mlp_widths", List<&C::mlp_widths>},
    {"dropout", Number<&C::dropout>},
    {"cnn_channels", List<&C::cnn_channels>},
    {"batch_norm", Flag<&C::batch_norm>, true},
    {"seq_len", Number<&C::seq_len>},
    {"d_model", Number<&C::d_model>},
    {"layers", Number<&C::layers>},
    {"heads", Number<&C::heads>},
    {"data",
     [](C& c, const std::string& k, const Json& v) { return SetChoice(k, v, &c.data, kData); }},
    {"data_path", Text<&C::data_path>},
    {"label_column", Text<&C::label_column>},
    {"train_samples", Number<&C::train_samples>},
    {"val_fraction", Number<&C::val_fraction>},
    {"test", Flag<&C::test>, true},
    {"data_parallel", Number<&C::data_parallel>},
    {"micro_batch_size", Number<&C::micro_batch_size>},
    {"batch_size", Number<&C::batch_size>},
    {"grad_accumulation", Number<&C::grad_accumulation>},
    {"bucket_mb", Number<&C::bucket_mb>},
    {"overlap", Flag<&C::overlap>, true},
    {"learning_rate", Number<&C::learning_rate>},
    {"lr", Number<&C::learning_rate>},
    {"lr_scaling", [](C& c, const std::string& k,
                      const Json& v) { return SetChoice(k, v, &c.lr_scaling, kLrScalings); }},
    {"base_batch", Number<&C::base_batch>},
    {"warmup_fraction", Number<&C::warmup_fraction>},
    {"schedule", [](C& c, const std::string& k,
                    const Json& v) { return SetChoice(k, v, &c.schedule, kSchedules); }},
    {"optimizer", [](C& c, const std::string& k,
                     const Json& v) { return SetChoice(k, v, &c.optimizer, kOptimizers); }},
    {"momentum", Number<&C::momentum>},
    {"nesterov", Flag<&C::nesterov>, true},
    {"weight_decay", Number<&C::weight_decay>},
    {"precision", [](C& c, const std::string& k,
                     const Json& v) { return SetChoice(k, v, &c.precision, kPrecisions); }},
    {"loss_scale", SetLossScale},
    {"loss_scale_window", Number<&C::loss_scale_window>},
    {"grad_compression",
     [](C& c, const std::string& k, const Json& v) {
       return SetChoice(k, v, &c.grad_compression, kCompressions);
     }},
    {"device", [](C& c, const std::string& k,
                  const Json& v) { return SetChoice(k, v, &c.device, kDevices); }},
    {"grad_clip", Number<&C::grad_clip>},
    {"epochs", Number<&C::epochs>},
    {"max_steps", Number<&C::max_steps>},
    {"stop_at_epoch", Number<&C::stop_at_epoch>},
    {"seed", Number<&C::seed>},
    {"threads", Number<&C::threads>},
    {"flush_denormals", Flag<&C::flush_denormals>, true},
    {"metrics_every", Number<&C::metrics_every>},
    {"checkpoint_dir", Text<&C::checkpoint_dir>},
    {"resume", Flag<&C::resume>, true},
    {"save_params", Text<&C::save_params>},
    {"timeout", Number<&C::timeout_s>},
    {"nproc", Number<&C::nproc>},
};

// Applies one key of the parameter file (or a flag's value, as text) to the config.
Status Set(TrainerConfig& c, const std::string& key, const Json& v) {
  for (const Key& k : kKeys)
    if (key == k.name) return k.set(c, key, v);
  return Status::NotFound("unknown key '", key, "'");
}

Status Validate(const TrainerConfig& c) {
  auto positive = [](const char* name, double v) -> Status {
    if (!(v > 0)) return Status::Invalid(name, " must be > 0 (got ", v, ")");
    return Status::Ok();
  };
  HP_RETURN_IF_ERROR(positive("learning_rate", c.learning_rate));
  HP_RETURN_IF_ERROR(positive("batch_size", static_cast<double>(c.batch_size)));
  HP_RETURN_IF_ERROR(positive("grad_accumulation", c.grad_accumulation));
  HP_RETURN_IF_ERROR(positive("base_batch", static_cast<double>(c.base_batch)));
  HP_RETURN_IF_ERROR(positive("timeout", c.timeout_s));
  if (c.epochs < 1 && c.max_steps < 1)
    return Status::Invalid("epochs must be >= 1 (got ", c.epochs, ")");
  if (c.micro_batch_size < 0) return Status::Invalid("micro_batch_size must be >= 0");
  if (c.data_parallel < 0 || c.nproc < 0)
    return Status::Invalid("data_parallel and nproc must be >= 0");
  if (c.val_fraction < 0 || c.val_fraction >= 1)
    return Status::Invalid("val_fraction must be in [0, 1) (got ", c.val_fraction, ")");
  if (c.warmup_fraction < 0 || c.warmup_fraction >= 1)
    return Status::Invalid("warmup_fraction must be in [0, 1) (got ", c.warmup_fraction, ")");
  if (c.dropout < 0 || c.dropout >= 1) return Status::Invalid("dropout must be in [0, 1)");
  if (c.momentum < 0 || c.momentum >= 1) return Status::Invalid("momentum must be in [0, 1)");
  if (c.bucket_mb < 0) return Status::Invalid("bucket_mb must be >= 0");
  if (c.loss_scale_window < 1)
    return Status::Invalid("loss_scale_window must be >= 1 (got ", c.loss_scale_window, ")");
  if (c.model == ModelKind::kCharLm && c.data != DataKind::kText)
    return Status::Invalid("model charlm trains on --data text");
  if (c.data == DataKind::kText && c.model != ModelKind::kCharLm && c.model_file.empty())
    return Status::Invalid("--data text needs --model charlm");
  if (c.d_model % c.heads != 0) return Status::Invalid("d_model must be a multiple of heads");
  return Status::Ok();
}

// A key's flag: dashes for underscores.
std::string FlagName(const char* key) {
  std::string flag = key;
  for (char& ch : flag)
    if (ch == '_') ch = '-';
  return flag;
}

// A flag per key of Set (its value parsed later, by Set), --params-file and --help.
void AddOptions(cxxopts::Options& o) {
  auto adder = o.add_options();
  for (const Key& k : kKeys) {
    std::string flag = FlagName(k.name);
    if (k.boolean) {
      adder(flag, "true|false (--flag alone is true; write --flag=false)",
            cxxopts::value<std::string>()->implicit_value("true"));
    } else {
      adder(flag, "", cxxopts::value<std::string>());
    }
  }
  adder("params-file", StrCat("JSON parameters (default $", env::kParamsFile, ")"),
        cxxopts::value<std::string>())("h,help", "this help");
}

// Parses argv into `args`; --help is returned as kCancelled with the help text.
Status ParseArgs(cxxopts::Options& o, int argc, char** argv, cxxopts::ParseResult* args) {
  try {
    *args = o.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    return Status::Invalid(e.what(), " (see hyperpack-trainer --help)");
  }
  if (args->count("help")) return Status(StatusCode::kCancelled, o.help());
  if (!args->unmatched().empty())
    return Status::Invalid("unexpected argument '", args->unmatched()[0], "'");
  return Status::Ok();
}

// The parameters: --params-file, else the file the scheduler names in the environment, else the
// JSON it (or an exported launcher line, which has no file to name) puts in HYPERPACK_PARAMS.
Status ApplyParamsFile(const cxxopts::ParseResult& args, TrainerConfig& c) {
  std::string params_file;
  if (args.count("params-file")) {
    params_file = args["params-file"].as<std::string>();
  } else if (const char* value = std::getenv(env::kParamsFile); value && *value) {
    params_file = value;
  }
  Json params;
  if (!params_file.empty()) {
    std::ifstream in(params_file);
    if (!in) return Status::Invalid("cannot read the parameter file ", params_file);
    params = Json::parse(in, nullptr, false);
  } else if (const char* inline_json = std::getenv(env::kParams); inline_json && *inline_json) {
    params_file = std::string("$") + env::kParams;
    params = Json::parse(inline_json, nullptr, false);
  } else {
    return Status::Ok();
  }
  if (params.is_discarded() || !params.is_object())
    return Status::Invalid(params_file, ": expected a JSON object of parameters");
  for (const auto& [key, value] : params.items()) {
    Status s = Set(c, key, value);
    // A study may tune parameters that are not the trainer's (they reach the command line or
    // another tool); those are skipped.
    if (s.code() == StatusCode::kNotFound) continue;
    if (!s.ok()) return s.WithContext(params_file);
  }
  return Status::Ok();
}

// Flags, after the parameter file: a flag overrides the file.
Status ApplyFlags(const cxxopts::ParseResult& args, TrainerConfig& c) {
  for (const Key& k : kKeys) {
    std::string flag = FlagName(k.name);
    if (!args.count(flag)) continue;
    HP_RETURN_IF_ERROR(
        k.set(c, k.name, Json(args[flag].as<std::string>())).WithContext("--" + flag));
  }
  return Status::Ok();
}

// What the scheduler asks of this run through the environment.
Status ApplyEnvironment(TrainerConfig& c) {
  // A scheduler re-running an interrupted trial asks it to continue from its checkpoints.
  if (const char* value = std::getenv(env::kResume); value && std::string(value) == "1")
    c.resume = !c.checkpoint_dir.empty() || std::getenv(env::kCheckpointDir) != nullptr;
  // A pruner that pauses trials at their rung (ASHA's promote mode) says where to stop.
  if (const char* value = std::getenv(env::kStopAt); value && *value && c.stop_at_epoch <= 0) {
    auto v = ParseDouble(value);
    if (!v || *v < 1 || *v != std::floor(*v))
      return Status::Invalid(env::kStopAt, "='", value, "' is not a whole number of epochs >= 1");
    c.stop_at_epoch = static_cast<int>(*v);
  }
  if (c.checkpoint_dir.empty()) {
    if (const char* value = std::getenv(env::kCheckpointDir); value && *value)
      c.checkpoint_dir = value;
  }
  return Status::Ok();
}

}  // namespace

Result<TrainerConfig> ParseConfig(int argc, char** argv) {
  TrainerConfig c;
  cxxopts::Options o(
      "hyperpack-trainer",
      StrCat("Data-parallel libtorch training that reports metrics as JSON lines.\n"
             "Parameters come from ",
             env::kParamsFile,
             " (or --params-file), then flags.\n"
             "Exit: 0 done, 3 this configuration cannot run (out of memory, a batch\n"
             "larger than the data), 1 anything else."));
  AddOptions(o);
  cxxopts::ParseResult args;
  HP_RETURN_IF_ERROR(ParseArgs(o, argc, argv, &args));
  HP_RETURN_IF_ERROR(ApplyParamsFile(args, c));
  HP_RETURN_IF_ERROR(ApplyFlags(args, c));
  HP_RETURN_IF_ERROR(ApplyEnvironment(c));
  if (c.data_path.empty() && c.data == DataKind::kFmnist)
    c.data_path = "/usr/share/datasets/fashion-mnist";
  if (c.data_path.empty())
    return Status::Invalid("--data-path is required for --data ", Name(c.data));
  HP_RETURN_IF_ERROR(Validate(c));
  return c;
}

const char* Name(ModelKind model) { return NameOf(model, kModels); }
const char* Name(DataKind data) { return NameOf(data, kData); }

}  // namespace hyperpack::trainer
