#include "launchers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hyperpack/env_vars.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

namespace hyperpack::report {
namespace {

using study::RoleSource;
using study::TrainingRole;
using study::TrainingRoleName;
using Json = nlohmann::ordered_json;

// The names each role goes by in the wild (W&B, Optuna and Ray Tune examples, DeepSpeed, Hugging
// Face, Lightning, NeMo, torchtitan), compared ignoring case and with '-' read as '_'.
const std::map<TrainingRole, std::vector<std::string>>& CommonNames() {
  static const std::map<TrainingRole, std::vector<std::string>> kNames = {
      {TrainingRole::kLearningRate, {"learning_rate", "lr", "base_lr", "max_lr", "peak_lr"}},
      {TrainingRole::kMicroBatch,
       {"micro_batch_size", "micro_batch", "mbs", "train_micro_batch_size_per_gpu",
        "per_device_train_batch_size", "batch_size_per_gpu", "batch_size_per_device",
        "per_device_batch_size", "local_batch_size"}},
      {TrainingRole::kGlobalBatch,
       {"batch_size", "global_batch_size", "global_batch", "train_batch_size", "gbs",
        "effective_batch_size"}},
      {TrainingRole::kDataParallel,
       {"data_parallel", "data_parallel_size", "dp", "dp_size", "dp_degree", "world_size", "nproc",
        "nproc_per_node", "num_gpus", "gpus", "devices"}},
      {TrainingRole::kAccumulation,
       {"grad_accumulation", "gradient_accumulation_steps", "grad_accum", "grad_accum_steps",
        "accumulate_grad_batches", "accumulation_steps", "gradient_accumulation"}},
      {TrainingRole::kPrecision, {"precision", "dtype", "mixed_precision", "amp_dtype"}},
      {TrainingRole::kWarmupRatio, {"warmup_ratio", "warmup_fraction", "warmup_frac"}},
      {TrainingRole::kWarmupSteps, {"warmup_steps", "warmup_iters", "num_warmup_steps"}},
      {TrainingRole::kWeightDecay, {"weight_decay", "wd"}},
      {TrainingRole::kMomentum, {"momentum", "sgd_momentum"}},
      {TrainingRole::kOptimizer, {"optimizer", "optim", "opt"}},
  };
  return kNames;
}

std::string Normalised(std::string name) {
  for (char& c : name) c = c == '-' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

struct Found {
  std::string from;  // the parameter's name, or "export.roles" for a fixed value
  Value value;
};

std::optional<Found> FindRole(TrainingRole role, const Params& params,
                              const study::ExportSpec& spec) {
  if (auto it = spec.roles.find(role); it != spec.roles.end()) {
    const RoleSource& source = it->second;
    if (source.fixed) return Found{"export.roles", *source.fixed};
    for (const auto& [name, value] : params)
      if (name == source.param) return Found{name, value};
    return std::nullopt;  // a conditional parameter inactive in this trial
  }
  for (const std::string& common : CommonNames().at(role))
    for (const auto& [name, value] : params)
      if (Normalised(name) == common) return Found{name, value};
  return std::nullopt;
}

std::optional<double> AsNumber(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* s = std::get_if<std::string>(&v)) return ParseDouble(*s);
  return std::nullopt;
}

std::string RoleHint(TrainingRole role) {
  return StrCat("name it in the study file: export: {roles: {", TrainingRoleName(role),
                ": PARAMETER}} (or a fixed value)");
}

Status WrongKind(TrainingRole role, const Found& f, const std::string& expected) {
  return Status::Invalid(TrainingRoleName(role), " (from ", f.from, "): '", FormatValue(f.value),
                         "' is not ", expected);
}

// A positive whole number, or an error naming the role and its source.
Result<std::optional<int64_t>> WholeRole(TrainingRole role, const Params& params,
                                         const study::ExportSpec& spec, int64_t min) {
  auto f = FindRole(role, params, spec);
  if (!f) return std::optional<int64_t>();
  auto n = AsNumber(f->value);
  if (!n || *n != std::floor(*n) || *n < static_cast<double>(min))
    return WrongKind(role, *f, StrCat("a whole number >= ", min));
  return std::optional<int64_t>(static_cast<int64_t>(*n));
}

Result<std::optional<double>> NumberRole(TrainingRole role, const Params& params,
                                         const study::ExportSpec& spec) {
  auto f = FindRole(role, params, spec);
  if (!f) return std::optional<double>();
  auto n = AsNumber(f->value);
  if (!n || !(*n >= 0) || !std::isfinite(*n)) return WrongKind(role, *f, "a number >= 0");
  return n;
}

std::string Source(TrainingRole role, const Params& params, const study::ExportSpec& spec) {
  auto f = FindRole(role, params, spec);
  return f ? f->from : "";
}

// The batch roles: two of micro and global (with accumulation and data-parallel, each 1 when
// nothing plays it) determine the third.
Status ResolveBatch(const Params& params, const study::ExportSpec& spec, TrainingSetup* s) {
  HP_ASSIGN_OR_RETURN(auto dp, WholeRole(TrainingRole::kDataParallel, params, spec, 1));
  HP_ASSIGN_OR_RETURN(auto accum, WholeRole(TrainingRole::kAccumulation, params, spec, 1));
  HP_ASSIGN_OR_RETURN(auto micro, WholeRole(TrainingRole::kMicroBatch, params, spec, 1));
  HP_ASSIGN_OR_RETURN(auto global, WholeRole(TrainingRole::kGlobalBatch, params, spec, 1));
  s->data_parallel = dp.value_or(1);
  s->accumulation = accum.value_or(1);
  const int64_t per_micro = s->data_parallel * s->accumulation;
  auto from = [&](TrainingRole r) {
    std::string source = Source(r, params, spec);
    return source.empty() ? std::string("1, nothing plays it") : source;
  };
  s->provenance.push_back(
      StrCat("data_parallel = ", s->data_parallel, " (", from(TrainingRole::kDataParallel), ")"));
  s->provenance.push_back(
      StrCat("accumulation = ", s->accumulation, " (", from(TrainingRole::kAccumulation), ")"));
  if (!micro && !global) {
    std::vector<std::string> names;
    for (const auto& [name, value] : params) names.push_back(name);
    return Status::Invalid("no parameter plays the micro batch or the global batch (parameters: ",
                           Join(names, ", "), "); ", RoleHint(TrainingRole::kGlobalBatch));
  }
  if (micro && global) {
    if (*micro * per_micro != *global)
      return Status::Invalid("global batch ", *global, " (",
                             Source(TrainingRole::kGlobalBatch, params, spec),
                             ") is not micro batch ", *micro, " x accumulation ", s->accumulation,
                             " x data-parallel ", s->data_parallel, " = ", *micro * per_micro);
    s->micro_batch = *micro;
    s->global_batch = *global;
  } else if (global) {
    if (*global % per_micro != 0)
      return Status::Invalid("global batch ", *global, " (",
                             Source(TrainingRole::kGlobalBatch, params, spec),
                             ") is not a multiple of accumulation ", s->accumulation,
                             " x data-parallel ", s->data_parallel);
    s->global_batch = *global;
    s->micro_batch = *global / per_micro;
  } else {
    s->micro_batch = *micro;
    s->global_batch = *micro * per_micro;
  }
  s->provenance.push_back(StrCat("micro_batch = ", s->micro_batch, " (",
                                 micro ? Source(TrainingRole::kMicroBatch, params, spec)
                                       : StrCat("global batch / ", per_micro),
                                 ")"));
  s->provenance.push_back(StrCat("global_batch = ", s->global_batch, " (",
                                 global ? Source(TrainingRole::kGlobalBatch, params, spec)
                                        : StrCat("micro batch x ", per_micro),
                                 ")"));
  return Status::Ok();
}

Json WholeAsInteger(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15) return static_cast<int64_t>(x);
  return x;
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  bool safe = !s.empty() && s.find_first_not_of(
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789_-.,:/+=@%") == std::string::npos;
  if (safe) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<TrainingSetup> ResolveSetup(const Params& params, const study::ExportSpec& spec) {
  TrainingSetup s;
  HP_RETURN_IF_ERROR(ResolveBatch(params, spec, &s));
  HP_ASSIGN_OR_RETURN(s.learning_rate, NumberRole(TrainingRole::kLearningRate, params, spec));
  HP_ASSIGN_OR_RETURN(s.weight_decay, NumberRole(TrainingRole::kWeightDecay, params, spec));
  HP_ASSIGN_OR_RETURN(s.momentum, NumberRole(TrainingRole::kMomentum, params, spec));
  HP_ASSIGN_OR_RETURN(s.warmup_ratio, NumberRole(TrainingRole::kWarmupRatio, params, spec));
  if (s.warmup_ratio && *s.warmup_ratio >= 1)
    return Status::Invalid("warmup_ratio (from ", Source(TrainingRole::kWarmupRatio, params, spec),
                           "): ", *s.warmup_ratio, " is not a fraction in [0, 1)");
  HP_ASSIGN_OR_RETURN(s.warmup_steps, WholeRole(TrainingRole::kWarmupSteps, params, spec, 0));
  if (auto f = FindRole(TrainingRole::kPrecision, params, spec)) {
    auto p = study::ParsePrecision(f->value);
    if (!p) return WrongKind(TrainingRole::kPrecision, *f, "a precision: fp32, fp16 or bf16");
    s.precision = *p;
  }
  if (auto f = FindRole(TrainingRole::kOptimizer, params, spec)) {
    s.optimizer = study::ParseOptimizer(f->value);
    if (!s.optimizer) return WrongKind(TrainingRole::kOptimizer, *f, "sgd, adam or adamw");
  }
  for (TrainingRole role : study::kAllTrainingRoles)
    if (auto f = FindRole(role, params, spec))
      s.played[role] = {f->from == "export.roles" ? "" : f->from, f->value};
  return s;
}

void NameWhatIsNotCarried(const Params& params, const TrainingSetup& setup,
                          const std::string& format, LauncherOutput* out) {
  auto carried = [&](TrainingRole r) {
    return std::find(out->carried.begin(), out->carried.end(), r) != out->carried.end();
  };
  auto named = [](const std::string& name, const Value& v) {
    return StrCat(name, " = ", FormatValue(v));
  };
  // A role the format could not write, with its reason.
  for (const auto& [role, reason] : out->not_carried) {
    auto it = setup.played.find(role);
    if (it == setup.played.end()) continue;
    const std::string who = it->second.param.empty()
                                ? StrCat(TrainingRoleName(role), " (export.roles)")
                                : it->second.param;
    out->warnings.push_back(
        StrCat(format, " does not carry ", named(who, it->second.value), ": ", reason));
  }
  // Parameters that play no role the format writes.
  std::vector<std::string> rest;
  for (const auto& [name, value] : params) {
    bool placed = false, explained = false;
    for (const auto& [role, player] : setup.played) {
      if (player.param != name) continue;
      placed = placed || carried(role);
      explained = explained || out->not_carried.count(role) > 0;
    }
    if (!placed && !explained) rest.push_back(named(name, value));
  }
  if (!rest.empty())
    out->warnings.push_back(StrCat(format, " does not carry ", Join(rest, ", "),
                                   ": none of its fields holds them; hand them to your program "
                                   "yourself (--format env or torchrun carries every parameter)"));
}

LauncherOutput DeepSpeedConfig(const TrainingSetup& s) {
  LauncherOutput out;
  // train_batch_size = micro x accumulation x world size: DeepSpeed checks it against the ranks.
  out.carried = {TrainingRole::kGlobalBatch, TrainingRole::kMicroBatch, TrainingRole::kAccumulation,
                 TrainingRole::kDataParallel, TrainingRole::kPrecision};
  Json c;
  c["train_batch_size"] = s.global_batch;
  c["train_micro_batch_size_per_gpu"] = s.micro_batch;
  c["gradient_accumulation_steps"] = s.accumulation;
  if (s.optimizer && s.learning_rate) {
    Json params;
    params["lr"] = WholeAsInteger(*s.learning_rate);
    if (s.weight_decay) params["weight_decay"] = WholeAsInteger(*s.weight_decay);
    if (*s.optimizer == Optimizer::kSgd && s.momentum)
      params["momentum"] = WholeAsInteger(*s.momentum);
    else
      out.not_carried[TrainingRole::kMomentum] =
          "DeepSpeed's Adam and AdamW take betas, not momentum";
    // Adam and AdamW are DeepSpeed's own; other names fall through to torch.optim, by class name.
    const char* type = *s.optimizer == Optimizer::kSgd    ? "SGD"
                       : *s.optimizer == Optimizer::kAdam ? "Adam"
                                                          : "AdamW";
    c["optimizer"] = Json{{"type", type}, {"params", params}};
    out.carried.insert(out.carried.end(), {TrainingRole::kOptimizer, TrainingRole::kLearningRate,
                                           TrainingRole::kWeightDecay, TrainingRole::kMomentum});
  } else {
    const TrainingRole missing =
        s.optimizer ? TrainingRole::kLearningRate : TrainingRole::kOptimizer;
    const std::string why = StrCat("no ", TrainingRoleName(missing),
                                   " role, so no \"optimizer\" block: give it to "
                                   "your own optimizer, or ",
                                   RoleHint(missing));
    for (TrainingRole r : {TrainingRole::kLearningRate, TrainingRole::kWeightDecay,
                           TrainingRole::kMomentum, TrainingRole::kOptimizer})
      out.not_carried[r] = why;
  }
  if (s.warmup_steps && s.learning_rate) {
    c["scheduler"] = Json{{"type", "WarmupLR"},
                          {"params",
                           {{"warmup_min_lr", 0},
                            {"warmup_max_lr", WholeAsInteger(*s.learning_rate)},
                            {"warmup_num_steps", *s.warmup_steps}}}};
    out.carried.push_back(TrainingRole::kWarmupSteps);
  } else {
    out.not_carried[TrainingRole::kWarmupSteps] = "WarmupLR needs a learning rate to warm up to";
  }
  out.not_carried[TrainingRole::kWarmupRatio] =
      "DeepSpeed has no form for it without the run's total steps: set "
      "scheduler.params.warmup_num_steps to that fraction of them";
  if (s.precision == TrainPrecision::kFp16) {
    // Dynamic loss scaling (loss_scale 0), starting at 2^16 like hyperpack-trainer's.
    c["fp16"] = Json{{"enabled", true},           {"loss_scale", 0}, {"initial_scale_power", 16},
                     {"loss_scale_window", 1000}, {"hysteresis", 2}, {"min_loss_scale", 1}};
  } else if (s.precision == TrainPrecision::kBf16) {
    c["bf16"] = Json{{"enabled", true}};
  }
  out.text = c.dump(2) + "\n";
  return out;
}

LauncherOutput HuggingFaceArguments(const TrainingSetup& s) {
  LauncherOutput out;
  out.carried = {
      TrainingRole::kMicroBatch,   TrainingRole::kGlobalBatch, TrainingRole::kAccumulation,
      TrainingRole::kLearningRate, TrainingRole::kWarmupRatio, TrainingRole::kWarmupSteps,
      TrainingRole::kWeightDecay,  TrainingRole::kOptimizer,   TrainingRole::kPrecision};
  Json a;
  a["per_device_train_batch_size"] = s.micro_batch;
  a["gradient_accumulation_steps"] = s.accumulation;
  if (s.learning_rate) a["learning_rate"] = WholeAsInteger(*s.learning_rate);
  // transformers 5 reads a warmup_steps in [0, 1) as a fraction of the steps and deprecates
  // warmup_ratio (removed in 5.2); 4.x reads only warmup_ratio as a fraction.
  if (s.warmup_steps) {
    a["warmup_steps"] = *s.warmup_steps;
    // One warm-up only: a ratio beside a count would be dropped without a word.
    if (s.warmup_ratio)
      out.not_carried[TrainingRole::kWarmupRatio] = StrCat(
          "warmup_steps ", *s.warmup_steps, " is written and the Trainer warms up once; drop one");
  } else if (s.warmup_ratio) {
    a["warmup_steps"] = WholeAsInteger(*s.warmup_ratio);
    out.warnings.push_back(
        StrCat("warmup_steps ", FormatDouble(*s.warmup_ratio),
               " is a fraction of the steps as transformers 5 reads it; under transformers 4 "
               "name it warmup_ratio"));
  }
  if (s.weight_decay) a["weight_decay"] = WholeAsInteger(*s.weight_decay);
  if (s.optimizer) a["optim"] = *s.optimizer == Optimizer::kSgd ? "sgd" : "adamw_torch";
  if (s.optimizer && *s.optimizer == Optimizer::kAdam)
    out.warnings.push_back("Hugging Face's optimizers are AdamW or SGD: adam became adamw_torch");
  // The Trainer builds torch.optim.SGD from the learning rate alone: optim_args reaches only
  // some other optimizers, so a momentum written there would be dropped without a word.
  out.not_carried[TrainingRole::kMomentum] =
      "the Trainer's \"sgd\" takes no momentum (optim_args reaches other optimizers only): "
      "pass Trainer(optimizers=(torch.optim.SGD(params, lr, momentum=...), None))";
  if (s.precision == TrainPrecision::kBf16) a["bf16"] = true;
  if (s.precision == TrainPrecision::kFp16) a["fp16"] = true;
  out.not_carried[TrainingRole::kDataParallel] =
      StrCat("the data-parallel degree is the launcher's, not TrainingArguments': start ",
             s.data_parallel, " processes (torchrun --nproc_per_node ", s.data_parallel, ")");
  out.text = a.dump(2) + "\n";
  return out;
}

LauncherOutput LightningTrainer(const TrainingSetup& s) {
  LauncherOutput out;
  out.carried = {TrainingRole::kDataParallel, TrainingRole::kPrecision,
                 TrainingRole::kAccumulation, TrainingRole::kMicroBatch,
                 TrainingRole::kGlobalBatch,  TrainingRole::kLearningRate,
                 TrainingRole::kWeightDecay};
  const std::string why =
      "the LightningModule's configure_optimizers chooses it: add it under model: where your "
      "module takes it";
  for (TrainingRole r : {TrainingRole::kOptimizer, TrainingRole::kMomentum,
                         TrainingRole::kWarmupRatio, TrainingRole::kWarmupSteps})
    out.not_carried[r] = why;
  const char* precision = s.precision == TrainPrecision::kBf16   ? "bf16-mixed"
                          : s.precision == TrainPrecision::kFp16 ? "16-mixed"
                                                                 : "32-true";
  std::ostringstream y;
  y << "# LightningCLI config (--config FILE): the Trainer's arguments, and the values that "
       "belong\n"
       "# to your LightningModule and DataModule under model: and data:.\n";
  for (const std::string& line : s.provenance) y << "# " << line << "\n";
  y << "trainer:\n"
    << "  devices: " << s.data_parallel << "\n"
    << "  num_nodes: 1\n"
    << "  strategy: " << (s.data_parallel > 1 ? "ddp" : "auto") << "\n"
    << "  precision: \"" << precision << "\"\n"
    << "  accumulate_grad_batches: " << s.accumulation << "\n";
  y << "data:\n  batch_size: " << s.micro_batch << "   # per device: the DataLoader's\n";
  if (s.learning_rate || s.weight_decay) {
    y << "model:\n";
    if (s.learning_rate) y << "  learning_rate: " << FormatDouble(*s.learning_rate) << "\n";
    if (s.weight_decay) y << "  weight_decay: " << FormatDouble(*s.weight_decay) << "\n";
  }
  out.text = y.str();
  return out;
}

std::string ResolveParamVariables(const std::string& command, const Params& params,
                                  const std::vector<std::string>& all_names) {
  std::string out = command;
  for (const std::string& name : all_names) {
    const std::string var = study::ParamEnvName(name);
    auto it =
        std::find_if(params.begin(), params.end(), [&](const auto& p) { return p.first == name; });
    const std::optional<std::string> value =
        it == params.end() ? std::nullopt : std::optional<std::string>(FormatValue(it->second));
    // ${VAR:-default}, ${VAR}, then $VAR not followed by a name character.
    for (size_t at = 0; (at = out.find("${" + var, at)) != std::string::npos;) {
      const size_t close = out.find('}', at);
      if (close == std::string::npos) break;
      const std::string inside = out.substr(at + 2, close - at - 2);
      std::string replacement;
      if (inside == var) {
        replacement = value.value_or("");
      } else if (inside.rfind(var + ":-", 0) == 0) {
        replacement = value.value_or(inside.substr(var.size() + 2));
      } else {
        at = close;  // another variable whose name starts with this one's
        continue;
      }
      out.replace(at, close - at + 1, ShellQuote(replacement));
      at += ShellQuote(replacement).size();
    }
    for (size_t at = 0; (at = out.find("$" + var, at)) != std::string::npos;) {
      const size_t end = at + 1 + var.size();
      if (end < out.size() &&
          (std::isalnum(static_cast<unsigned char>(out[end])) || out[end] == '_')) {
        at = end;
        continue;
      }
      out.replace(at, end - at, ShellQuote(value.value_or("")));
      at += ShellQuote(value.value_or("")).size();
    }
  }
  return out;
}

LauncherOutput TorchrunCommand(const TrainingSetup& s, const std::string& command,
                               const Params& params) {
  LauncherOutput out;
  std::istringstream words(command);
  std::string program, rest;
  words >> program;
  std::getline(words, rest);
  // `python train.py ...`: torchrun starts the interpreter itself.
  std::string base = program.substr(program.find_last_of('/') + 1);
  bool python = base.rfind("python", 0) == 0;
  if (python) {
    std::istringstream script(rest);
    script >> program;
    std::getline(script, rest);
  } else {
    python = program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0;
  }
  std::ostringstream c;
  for (const std::string& line : s.provenance) c << "# " << line << "\n";
  if (!params.empty()) {
    // What the trial read from its environment: the parameters as JSON and one HP_ each.
    nlohmann::ordered_json json = nlohmann::ordered_json::object();
    std::vector<std::string> vars;
    for (const auto& [name, value] : params) {
      std::visit([&](const auto& v) { json[name] = v; }, value);
      vars.push_back(study::ParamEnvName(name) + "=" + ShellQuote(FormatValue(value)));
    }
    c << "env " << env::kParams << "=" << ShellQuote(json.dump()) << " " << Join(vars, " ") << " ";
  }
  // Underscores: torchrun 1.13 knows no other spelling, 2.x reads both. --redirects and --tee:
  // torchrun 1.13 under Python 3.11 (Debian bookworm's) cannot read their default, 0 (an IntFlag's
  // zero member), and fails before starting a rank; 1 tees each rank's stdout to its log folder.
  c << "torchrun --nnodes=1 --nproc_per_node=" << s.data_parallel
    << " --rdzv_backend=c10d --rdzv_endpoint=\"${MASTER_ADDR:-localhost}:${MASTER_PORT:-29500}\""
    << " --redirects=1 --tee=1";
  if (!python) c << " --no_python";
  c << " " << program << rest << "\n";
  if (command.find('|') != std::string::npos || command.find(';') != std::string::npos ||
      command.find("&&") != std::string::npos)
    out.warnings.push_back(
        "the trial's command is a shell pipeline; torchrun runs one program: check the line");
  out.text = c.str();
  return out;
}

LauncherOutput HydraOverrides(const Params& params) {
  LauncherOutput out;
  std::vector<std::string> parts;
  for (const auto& [name, value] : params) {
    std::string text = FormatValue(value);
    // Hydra's grammar reads some characters itself; such a value goes in quotes.
    bool plain = !text.empty() && text.find_first_of(" ,=[]{}()'\"\\:$*?") == std::string::npos;
    std::string v = plain ? text : "'" + text + "'";
    parts.push_back(ShellQuote(name + "=" + v));
  }
  out.text = Join(parts, " ") + "\n";
  return out;
}

}  // namespace hyperpack::report
