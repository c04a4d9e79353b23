// Sweep files of other tools turned into hyperpack study files: `hyperpack import FILE --from
// wandb` writes the study file text, each key with a comment saying where it came from.
//
// Each format is read with its own tool's documented semantics (a W&B `log_uniform`'s bounds are
// natural-log exponents; `log_uniform_values`' are the values). What cannot be carried over is a
// warning naming the line and what was done instead, or an error when nothing sensible can be;
// never dropped silently. The text that comes back parses as a study file (the caller may check
// with ParseStudy).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::study {

// kOptuna is an Optuna storage (an RDB SQLite database or a JournalStorage file): a study with its
// trials rather than a sweep, which `hyperpack import` stores (optuna.h); ImportSweep and
// LoadSweepFile refuse it, saying so.
enum class SweepFormat { kWandb, kNni, kDetermined, kKatib, kOptuna };
// "wandb", "nni", "determined", "katib", "optuna"; errors list the formats there are.
Result<SweepFormat> ParseSweepFormat(const std::string& name);
// --from's value: a format, or nullopt for "auto" (tell the format from the file).
Result<std::optional<SweepFormat>> ParseFromFlag(const std::string& name);
const char* SweepFormatName(SweepFormat format);  // "wandb", ...

// Which tool's file `text` is: an Optuna storage by its first bytes (SQLite's header, or a journal's
// first operation), else from its top-level keys:
//   a hyperpack study  objective and search_space            -> nullopt
//   Katib              kind: Experiment, or a kubeflow.org apiVersion
//   Determined         searcher (or hyperparameters with entrypoint)
//   NNI                trialCommand, searchSpace(File|Path), trainingService, trialConcurrency,
//                      maxTrialNumber or trial.command, in any case or with underscores
//   W&B                method, or parameters with metric, program or command
// A file that matches none, or several, is an error at FILE:LINE:COL that lists what was looked
// for and says to name the tool with --from.
Result<std::optional<SweepFormat>> DetectSweepFormat(const std::string& text,
                                                     const std::string& filename);

// What the user adds to another tool's file on import.
struct ImportOptions {
  // The trial's command, in place of the file's (a hyperpack template: {param} placeholders):
  // for a Determined Trial class, a container that gives only args to its image's entrypoint, or
  // any command that should run differently here.
  std::optional<std::string> command;
};

struct ImportOutcome {
  std::string study_yaml;            // set only when errors is empty
  std::vector<Diagnostic> errors;    // file:line:column: key: what cannot be carried over
  std::vector<Diagnostic> warnings;  // "warning: ...": carried over approximately
};

// `text` is the sweep file's contents and `filename` its path (for diagnostics and the study's
// default name).
ImportOutcome ImportSweep(const std::string& text, const std::string& filename, SweepFormat format,
                          const ImportOptions& options = {});

// The sweep file at `path` imported and parsed as a study, for `hyperpack run FILE --from ...`:
// the import's errors and warnings (at the sweep file's lines) come first.
ParseOutcome LoadSweepFile(const std::string& path, SweepFormat format,
                           const ImportOptions& options = {});

// `hyperpack run FILE`: a hyperpack study file, or another tool's file in `format`, or (nullopt)
// whichever DetectSweepFormat finds.
ParseOutcome LoadAnyStudyFile(const std::string& path, std::optional<SweepFormat> format,
                              const ImportOptions& options = {});

}  // namespace hyperpack::study
