// A trial's configuration as the launchers people already use take it: DeepSpeed's JSON, a
// torchrun command line, Hugging Face TrainingArguments, Lightning Trainer arguments and Hydra
// overrides.
//
// The part each parameter plays (micro batch, accumulation, data-parallel degree, ...) comes from
// the study file's `export.roles`, else from common parameter names; the batch arithmetic every
// launcher checks (global = micro x accumulation x data-parallel) is done once, in ResolveSetup,
// and each format only writes it out. A role that a format needs and nobody plays is an error that
// says how to name it.
// Thread-safety: pure functions over values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/study/training.h"

namespace hyperpack::report {

// A trial's parameters in the search space's order.
using Params = std::vector<std::pair<std::string, Value>>;

using study::Optimizer;
using study::TrainPrecision;

struct TrainingSetup {
  std::optional<double> learning_rate;
  int64_t micro_batch = 0, global_batch = 0;  // global = micro x accumulation x data_parallel
  int64_t data_parallel = 1, accumulation = 1;
  TrainPrecision precision = TrainPrecision::kFp32;
  std::optional<double> warmup_ratio;
  std::optional<int64_t> warmup_steps;
  std::optional<double> weight_decay, momentum;
  std::optional<Optimizer> optimizer;
  // Where each role came from, for a comment: "micro_batch = batch_size / (2 x 1)".
  std::vector<std::string> provenance;
  // Who plays each role that someone plays: a parameter (with its value), or export.roles' fixed
  // value (`param` empty).
  struct Player {
    std::string param;
    Value value;
  };
  std::map<study::TrainingRole, Player> played;
};

// The roles of `params`, with the batch arithmetic checked. Errors: no batch size at all, a global
// batch that the accumulation and data-parallel degree do not divide, a value of the wrong kind.
Result<TrainingSetup> ResolveSetup(const Params& params, const study::ExportSpec& spec);

// What a format produced, and what it could not carry over (for standard error).
struct LauncherOutput {
  std::string text;
  std::vector<std::string> warnings;
  // The roles whose values the text holds, and why it could not hold others'.
  std::vector<study::TrainingRole> carried;
  std::map<study::TrainingRole, std::string> not_carried;
};

LauncherOutput DeepSpeedConfig(const TrainingSetup& setup);
LauncherOutput HuggingFaceArguments(const TrainingSetup& setup);
LauncherOutput LightningTrainer(const TrainingSetup& setup);
// `command`: the trial's command with the trial's values in it; a program not ending in .py is
// run with --no_python. The flags are spelled as torchrun 1.13 reads them (2.x reads both
// spellings), with --redirects=1 --tee=1, without which Debian's torchrun (1.13 on Python 3.11)
// fails. What the trial read from its environment travels with the line: `params` as
// HYPERPACK_PARAMS (JSON) and HP_<NAME> in an `env` prefix, and the command's own ${HP_NAME},
// ${HP_NAME:-default} and $HP_NAME resolved to the trial's values (the default where the
// parameter was inactive).
LauncherOutput TorchrunCommand(const TrainingSetup& setup, const std::string& command,
                               const Params& params = {});
// `command` with ${HP_NAME}, ${HP_NAME:-default} and $HP_NAME of `params` resolved; a variable of
// a parameter not in `params` (inactive) takes its default, or nothing.
std::string ResolveParamVariables(const std::string& command, const Params& params,
                                  const std::vector<std::string>& all_names);
// Appends one warning per reason to `out`, naming each parameter (NAME = VALUE) whose value the
// format's text does not hold: those whose role it could not write (with its reason), and those
// that play no role it writes. `format` names it in the warning ("--format hf").
void NameWhatIsNotCarried(const Params& params, const TrainingSetup& setup,
                          const std::string& format, LauncherOutput* out);
// Every parameter as key=value, quoted for the shell where needed.
LauncherOutput HydraOverrides(const Params& params);

// Single-quotes `s` for a POSIX shell when it holds anything but safe characters.
std::string ShellQuote(const std::string& s);

}  // namespace hyperpack::report
