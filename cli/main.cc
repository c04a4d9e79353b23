// hyperpack: the command line. Parses flags and hands over to the modules; no logic of its own.
//
// Exit codes: 0 ok, 1 runtime failure, 2 usage or validation error, 130 interrupted (Ctrl-C).

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hyperpack/dashboard/dashboard.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/placement/simulate.h"
#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/scheduler/serve.h"
#include "hyperpack/scheduler/slurm.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/import.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"

namespace {

using hyperpack::Result;
using hyperpack::Status;
using hyperpack::StatusCode;
namespace report = hyperpack::report;
namespace study = hyperpack::study;
namespace tuner = hyperpack::tuner;

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

constexpr char kUsageText[] = R"(hyperpack: hyperparameter tuning that keeps the GPUs busy

usage: hyperpack COMMAND [options]

commands:
  run STUDY.yaml        run a study, or resume it if it exists
  validate STUDY.yaml   check a study file and print its search space
  import FILE           a W&B sweep or an NNI, Determined or Katib experiment as a study file
  status [STUDY]        all studies, or one study's progress (--watch: live)
  trials STUDY          one row per trial
  best STUDY            the best trial so far
  export STUDY          the best configuration(s) as yaml, json, env or args, or as
                        DeepSpeed, torchrun, Hugging Face, Lightning or Hydra take them,
                        or every trial as an Optuna database
  report STUDY          the study's charts, trials and events as one self-contained HTML file
  dashboard             serve every study's page, live, over HTTP (read-only)
  simulate              replay a GPU workload through the placement code in virtual time
  serve                 run the scheduler as a daemon that agents join and studies are sent to
  agent                 run on a node: start the ranks the server places there

Storage: --storage PATH, else $HYPERPACK_STORAGE, else ./hyperpack.db.
Run 'hyperpack COMMAND --help' for a command's options.
)";

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return kUsage;
    default:
      return kFailure;
  }
}

// A whole file, or why it cannot be read; `what` names it for the message.
Result<std::string> ReadFileText(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path, ": cannot read ", what, " (does it exist?)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int Fail(const Status& s) {
  std::cerr << "hyperpack: " << s.message() << "\n";
  return ExitCodeFor(s);
}

std::string StoragePath(const cxxopts::ParseResult& args) {
  if (args.count("storage")) return args["storage"].as<std::string>();
  if (const char* env = std::getenv(hyperpack::env::kStorage); env && *env) return env;
  return "hyperpack.db";
}

void AddStorage(cxxopts::Options& o) {
  o.add_options()("storage", "SQLite file (default $HYPERPACK_STORAGE or ./hyperpack.db)",
                  cxxopts::value<std::string>());
}

// Parses argv for one subcommand; prints help or a usage error and returns an exit code when
// the command should not go on.
std::optional<int> Parse(cxxopts::Options& options, int argc, char** argv,
                         cxxopts::ParseResult* out, int positional_min, int positional_max) {
  options.add_options()("h,help", "show this help");
  options.add_options()("args", "", cxxopts::value<std::vector<std::string>>());
  options.parse_positional({"args"});
  try {
    *out = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    std::cerr << "hyperpack " << options.program() << ": " << e.what() << "\nsee: hyperpack "
              << options.program() << " --help\n";
    return kUsage;
  }
  if (out->count("help")) {
    std::cout << options.help();
    return kOk;
  }
  size_t n = out->count("args") ? (*out)["args"].as<std::vector<std::string>>().size() : 0;
  if (static_cast<int>(n) < positional_min || static_cast<int>(n) > positional_max) {
    std::cerr << "hyperpack " << options.program() << ": expected " << options.help();
    return kUsage;
  }
  return std::nullopt;
}

std::vector<std::string> Positional(const cxxopts::ParseResult& args) {
  if (!args.count("args")) return {};
  return args["args"].as<std::vector<std::string>>();
}

hyperpack::Result<std::unique_ptr<hyperpack::storage::Storage>> OpenForReading(
    const cxxopts::ParseResult& args) {
  hyperpack::storage::Storage::Options o;
  o.read_only = true;
  return hyperpack::storage::Storage::Open(StoragePath(args), o);
}

report::OutputFormat Format(const cxxopts::ParseResult& args) {
  return args.count("json") ? report::OutputFormat::kJson : report::OutputFormat::kTable;
}

// The shared secret of serve, agent and run --server, from --token-file.
hyperpack::Result<std::string> Token(const cxxopts::ParseResult& args) {
  if (!args.count("token-file"))
    return Status::Invalid("--token-file is required: a file holding the shared token");
  std::string error;
  std::string token =
      hyperpack::scheduler::protocol_ReadToken(args["token-file"].as<std::string>(), &error);
  if (token.empty()) return Status::Invalid(error);
  if (!error.empty()) std::cerr << "hyperpack: " << error << "\n";
  return token;
}

// `run --slurm '{...}'`: cluster.slurm for a study file that has none.
Status ApplySlurmFlag(const cxxopts::ParseResult& args, const std::string& path,
                      study::StudySpec* spec) {
  if (!args.count("slurm")) return Status::Ok();
  if (spec->cluster.slurm) {
    const study::SourcePos* pos = spec->cluster.slurm->Position("slurm");
    return Status::Invalid("--slurm: ", path,
                           pos ? hyperpack::StrCat(":", pos->line) : std::string(),
                           " has cluster.slurm already; change it there, or leave --slurm out");
  }
  auto slurm = study::ParseSlurmFlag(args["slurm"].as<std::string>());
  if (!slurm.ok()) return slurm.status();
  spec->cluster.slurm = std::move(*slurm);
  return Status::Ok();
}

// --from: another tool's file format, or nullopt for auto (told from the file).
hyperpack::Result<std::optional<study::SweepFormat>> SweepFormatArg(
    const cxxopts::ParseResult& args) {
  return study::ParseFromFlag(args.count("from") ? args["from"].as<std::string>() : "auto");
}

// --command: the trial's command in place of another tool's file's.
study::ImportOptions ImportOptionsArg(const cxxopts::ParseResult& args) {
  study::ImportOptions options;
  if (args.count("command")) options.command = args["command"].as<std::string>();
  return options;
}

// --max-trials and --max-parallel, each at least 1 where given.
Status BudgetArgs(const cxxopts::ParseResult& args, std::optional<int>* max_trials,
                  std::optional<int>* max_parallel) {
  const std::pair<const char*, std::optional<int>*> flags[] = {{"max-trials", max_trials},
                                                               {"max-parallel", max_parallel}};
  for (const auto& [key, target] : flags) {
    if (!args.count(key)) continue;
    const int v = args[key].as<int>();
    if (v < 1) return Status::Invalid("--", key, " must be >= 1 (got ", v, ")");
    *target = v;
  }
  return Status::Ok();
}

// --progress: auto is a live line on a terminal and a line per event otherwise.
Result<hyperpack::scheduler::RunOptions::Progress> ProgressArg(const cxxopts::ParseResult& args) {
  using P = hyperpack::scheduler::RunOptions::Progress;
  const std::string name = args["progress"].as<std::string>();
  if (name == "auto") return isatty(STDOUT_FILENO) ? P::kLine : P::kLog;
  static constexpr std::pair<const char*, P> kModes[] = {
      {"line", P::kLine}, {"log", P::kLog}, {"quiet", P::kQuiet}};
  for (const auto& [text, mode] : kModes)
    if (name == text) return mode;
  return Status::Invalid("--progress: '", name, "'; expected auto, line, log or quiet");
}

// `run --server`: the study goes to hyperpack serve, and its progress comes back.
int SubmitToServer(const cxxopts::ParseResult& args, const study::StudySpec& spec,
                   const std::string& path, std::optional<int> max_trials,
                   std::optional<int> max_parallel) {
  hyperpack::scheduler::SubmitOptions so;
  so.server = args["server"].as<std::string>();
  auto token = Token(args);
  if (!token.ok()) return Fail(token.status());
  so.token = *token;
  so.study_text = spec.source_text;
  so.study_path = std::filesystem::absolute(path).string();
  so.max_trials = max_trials;
  so.max_parallel = max_parallel;
  auto code = hyperpack::scheduler::SubmitStudy(so);
  if (!code.ok()) return Fail(code.status());
  return *code;
}

// The options of a run on this machine (or on Slurm) from run's flags, but its budget.
Result<hyperpack::scheduler::RunOptions> LocalRunOptions(const cxxopts::ParseResult& args) {
  hyperpack::scheduler::RunOptions ro;
  ro.storage_path = StoragePath(args);
  if (args.count("log-dir")) ro.log_dir = args["log-dir"].as<std::string>();
  HP_ASSIGN_OR_RETURN(ro.progress, ProgressArg(args));
  if (args.count("fake-gpus")) {
    int n = args["fake-gpus"].as<int>();
    if (n < 0 || n > 64) return Status::Invalid("--fake-gpus must be between 0 and 64");
    ro.node = hyperpack::scheduler::FakeGpuNode(n);
  }
  return ro;
}

int CmdRun(int argc, char** argv) {
  cxxopts::Options o("run", "hyperpack run STUDY.yaml: run a study, or resume it if it exists");
  o.custom_help("STUDY.yaml [options]");
  AddStorage(o);
  o.add_options()("max-trials", "override budget.max_trials", cxxopts::value<int>())(
      "max-parallel", "override budget.max_parallel", cxxopts::value<int>())(
      "log-dir", "where trial logs go (default: hyperpack_logs next to the storage)",
      cxxopts::value<std::string>())(
      "progress",
      "auto | line | log | quiet (auto: a live line on a terminal, log lines otherwise)",
      cxxopts::value<std::string>()->default_value("auto"))(
      "fake-gpus", "pretend this machine has N GPUs (tests and demos)", cxxopts::value<int>())(
      "server", "submit to hyperpack serve at HOST:PORT and follow the run",
      cxxopts::value<std::string>())("token-file", "with --server: the shared token",
                                     cxxopts::value<std::string>())(
      "slurm",
      "run each trial as a Slurm job, for a study file with no cluster.slurm: its keys as YAML, "
      "e.g. '{partition: gpu, time_limit: 2h}'",
      cxxopts::value<std::string>())(
      "from",
      "the file is another tool's: wandb, nni, determined or katib (see import); auto, the "
      "default, tells a study file or the tool from the file's keys",
      cxxopts::value<std::string>())(
      "command", "another tool's file: the trial's command in place of the file's (see import)",
      cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;

  std::string path = Positional(args)[0];
  auto format = SweepFormatArg(args);
  if (!format.ok()) return Fail(format.status());
  study::ParseOutcome parsed = study::LoadAnyStudyFile(path, *format, ImportOptionsArg(args));
  if (!parsed.warnings.empty()) std::cerr << parsed.WarningText() << "\n";
  if (!parsed.spec) {
    std::cerr << parsed.ErrorText() << "\n";
    return kUsage;
  }
  if (Status slurm = ApplySlurmFlag(args, path, &*parsed.spec); !slurm.ok()) return Fail(slurm);
  if (args.count("server") && parsed.spec->cluster.slurm)
    return Fail(
        Status::Invalid("--server runs trials on hyperpack agents and cluster.slurm on "
                        "Slurm: choose one"));
  std::optional<int> max_trials, max_parallel;
  if (Status budget = BudgetArgs(args, &max_trials, &max_parallel); !budget.ok())
    return Fail(budget);
  if (args.count("server"))
    return SubmitToServer(args, *parsed.spec, path, max_trials, max_parallel);
  auto ro = LocalRunOptions(args);
  if (!ro.ok()) return Fail(ro.status());
  ro->max_trials = max_trials;
  ro->max_parallel = max_parallel;
  auto summary = parsed.spec->cluster.slurm ? hyperpack::scheduler::RunSlurmStudy(*parsed.spec, *ro)
                                            : hyperpack::scheduler::RunStudy(*parsed.spec, *ro);
  if (!summary.ok()) return Fail(summary.status());
  return summary->exit_code;
}

// `hyperpack slurm-task COMMAND`: each task of a trial's Slurm job (written into its job script).
int CmdSlurmTask(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: hyperpack slurm-task COMMAND (run by the job scripts hyperpack writes)\n";
    return kUsage;
  }
  return Fail(hyperpack::scheduler::RunSlurmTask(argv[1]));
}

int CmdServe(int argc, char** argv) {
  cxxopts::Options o("serve", "hyperpack serve: the scheduler as a daemon for agents and studies");
  o.custom_help("--token-file FILE [--listen 127.0.0.1:7766] [options]");
  AddStorage(o);
  o.add_options()("listen", "ADDRESS:PORT (loopback unless told otherwise; port 0 picks one)",
                  cxxopts::value<std::string>()->default_value("127.0.0.1:7766"))(
      "token-file", "the shared token, at least 16 characters", cxxopts::value<std::string>())(
      "heartbeat-timeout", "seconds of silence before an agent is lost",
      cxxopts::value<double>()->default_value("30"))(
      "preempt-after",
      "seconds a study over its share has for its trials to end by themselves before its "
      "youngest are preempted (0: at once)",
      cxxopts::value<double>()->default_value("0"))(
      "log-dir", "where trial logs go (default: hyperpack_logs next to the storage)",
      cxxopts::value<std::string>())(
      "metrics", "serve Prometheus metrics at http://ADDRESS:PORT/metrics (e.g. 127.0.0.1:9464)",
      cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  auto token = Token(args);
  if (!token.ok()) return Fail(token.status());
  hyperpack::scheduler::ServeOptions so;
  so.listen = args["listen"].as<std::string>();
  so.token = *token;
  so.storage_path = StoragePath(args);
  so.heartbeat_timeout_s = args["heartbeat-timeout"].as<double>();
  if (!(so.heartbeat_timeout_s > 0) || so.heartbeat_timeout_s > 86400)
    return Fail(Status::Invalid("--heartbeat-timeout ", so.heartbeat_timeout_s,
                                " is out of range; expected seconds in (0, 86400], e.g. 30"));
  so.preempt_after_s = args["preempt-after"].as<double>();
  if (!(so.preempt_after_s >= 0) || so.preempt_after_s > 86400)
    return Fail(Status::Invalid("--preempt-after ", so.preempt_after_s,
                                " is out of range; expected seconds in [0, 86400], e.g. 300"));
  if (args.count("log-dir")) so.log_dir = args["log-dir"].as<std::string>();
  if (args.count("metrics")) so.metrics_listen = args["metrics"].as<std::string>();
  Status s = hyperpack::scheduler::Serve(so);
  return s.ok() ? kOk : Fail(s);
}

int CmdAgent(int argc, char** argv) {
  cxxopts::Options o("agent", "hyperpack agent: run the ranks the server places on this node");
  o.custom_help("--connect HOST:PORT --token-file FILE [options]");
  o.add_options()("connect", "the server, HOST:PORT", cxxopts::value<std::string>())(
      "token-file", "the shared token", cxxopts::value<std::string>())(
      "name", "this node's name (default: the host name)", cxxopts::value<std::string>())(
      "fake-gpus", "pretend to have N GPUs (tests and demos)", cxxopts::value<int>())(
      "heartbeat", "seconds between heartbeats", cxxopts::value<double>()->default_value("5"));
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  if (!args.count("connect")) return Fail(Status::Invalid("--connect HOST:PORT is required"));
  auto token = Token(args);
  if (!token.ok()) return Fail(token.status());
  hyperpack::scheduler::AgentOptions ao;
  ao.connect = args["connect"].as<std::string>();
  ao.token = *token;
  if (args.count("name")) ao.name = args["name"].as<std::string>();
  if (args.count("fake-gpus")) ao.fake_gpus = args["fake-gpus"].as<int>();
  ao.heartbeat_s = args["heartbeat"].as<double>();
  if (!(ao.heartbeat_s > 0) || ao.heartbeat_s > 3600)
    return Fail(Status::Invalid("--heartbeat ", args["heartbeat"].as<double>(),
                                " is out of range; expected seconds in (0, 3600], e.g. 5"));
  Status s = hyperpack::scheduler::RunAgent(ao);
  return s.ok() ? kOk : Fail(s);
}

// The format `import` reads `text` in: --from's, or the one the file's keys tell.
hyperpack::Result<study::SweepFormat> ImportFormat(const cxxopts::ParseResult& args,
                                                   const std::string& text,
                                                   const std::string& path) {
  HP_ASSIGN_OR_RETURN(auto format, SweepFormatArg(args));
  if (format) return *format;
  HP_ASSIGN_OR_RETURN(format, study::DetectSweepFormat(text, path));
  if (!format)
    return Status::Invalid(path,
                           ":1:1: this is already a hyperpack study file: check it with hyperpack "
                           "validate, run it with hyperpack run");
  std::cerr << path << ":1:1: warning: read as a " << study::SweepFormatName(*format)
            << " file (--from names the tool)\n";
  return *format;
}

int CmdImport(int argc, char** argv) {
  cxxopts::Options o("import", "hyperpack import FILE: another tool's sweep as a study file");
  o.custom_help("FILE [--from auto|wandb|nni|determined|katib] [--command CMD] [-o STUDY.yaml]");
  o.add_options()("from",
                  "the tool: wandb (a sweep), nni, determined or katib (an experiment); auto "
                  "tells it from the file's keys",
                  cxxopts::value<std::string>()->default_value("auto"))(
      "o,output", "write to FILE instead of standard output", cxxopts::value<std::string>())(
      "command",
      "the trial's command in place of the file's, with {param} placeholders: for a Determined "
      "Trial class, a container that gives only args, or a Launch sweep",
      cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  std::string path = Positional(args)[0];
  auto text = ReadFileText(path, "the sweep file");
  if (!text.ok()) return Fail(text.status());
  auto format = ImportFormat(args, *text, path);
  if (!format.ok()) {  // FILE:LINE:COL first, as every diagnostic of a file
    std::cerr << format.status().message() << "\n";
    return kUsage;
  }
  study::ImportOutcome imported = study::ImportSweep(*text, path, *format, ImportOptionsArg(args));
  for (const study::Diagnostic& d : imported.warnings) std::cerr << d.ToString() << "\n";
  if (!imported.errors.empty()) {
    for (const study::Diagnostic& d : imported.errors) std::cerr << d.ToString() << "\n";
    return kUsage;
  }
  if (!args.count("output")) {
    std::cout << imported.study_yaml;
    return kOk;
  }
  std::string target = args["output"].as<std::string>();
  std::ofstream out(target, std::ios::trunc);
  out << imported.study_yaml;
  if (!out.good()) return Fail(Status::Io("cannot write ", target));
  std::cerr << "wrote " << target << " (check it with: hyperpack validate " << target << ")\n";
  return kOk;
}

int CmdValidate(int argc, char** argv) {
  cxxopts::Options o("validate", "hyperpack validate STUDY.yaml: check a study file");
  o.custom_help("STUDY.yaml");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  std::string path = Positional(args)[0];
  study::ParseOutcome parsed = study::LoadStudyFile(path);
  if (!parsed.warnings.empty()) std::cerr << parsed.WarningText() << "\n";
  if (!parsed.spec) {
    std::cerr << parsed.ErrorText() << "\n";
    std::cerr << parsed.errors.size() << (parsed.errors.size() == 1 ? " error" : " errors")
              << " in " << path << "\n";
    return kUsage;
  }
  const study::StudySpec& s = *parsed.spec;
  std::cout << path << ": ok\n\n";
  std::cout << "study       " << s.name << "\n";
  std::cout << "objective   " << study::DirectionName(s.objective.direction) << " "
            << s.objective.metric << " (" << study::StrategyName(s.objective.strategy)
            << " reported value)\n";
  std::cout << "tuner       " << tuner::TunerAlgorithmName(s.tuner.algorithm);
  if (s.tuner.seed) std::cout << ", seed " << *s.tuner.seed;
  std::cout << "\nbudget      " << s.budget.max_trials << " trials, " << s.budget.max_parallel
            << " at a time, stop after " << s.budget.max_failed << " failures";
  if (s.budget.time_limit_s) std::cout << ", time limit " << *s.budget.time_limit_s << "s";
  std::cout << "\ncommand     " << s.trial.command << "\n";
  if (s.trial.timeout_s) std::cout << "timeout     " << *s.trial.timeout_s << "s\n";
  if (s.resources.gpus) std::cout << "gpus        " << s.resources.gpus->text() << "\n";
  if (s.resources.cpus) std::cout << "cpus        " << s.resources.cpus->text() << "\n";
  std::cout << "\nsearch space (" << s.space.size() << " parameters)\n";
  std::istringstream lines(s.space.Describe());
  for (std::string line; std::getline(lines, line);) std::cout << "  " << line << "\n";
  return kOk;
}

int CmdStatus(int argc, char** argv) {
  cxxopts::Options o("status", "hyperpack status [STUDY]: all studies, or one study's progress");
  o.custom_help("[STUDY] [--watch [--interval S]] [options]");
  AddStorage(o);
  o.add_options()("json", "print JSON (with --watch: one object a line, when it changes)")(
      "watch", "with STUDY: redraw a live view until no runner is on the study (Ctrl-C stops)")(
      "interval", "with --watch: seconds between frames, in (0, 3600]",
      cxxopts::value<double>()->default_value("2"));
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 1)) return *rc;
  auto names = Positional(args);
  if (args.count("watch") && names.empty())
    return Fail(Status::Invalid("--watch follows one study: hyperpack status STUDY --watch"));
  if (args.count("interval") && !args.count("watch"))
    return Fail(
        Status::Invalid("--interval goes with --watch: hyperpack status STUDY --watch "
                        "--interval S"));
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  if (args.count("watch")) {
    // Ctrl-C ends the watch between frames, cleanly: the handler only sets what `stop` reads.
    static volatile std::sig_atomic_t interrupted = 0;
    std::signal(SIGINT, [](int) { interrupted = 1; });
    report::WatchOptions w;
    w.interval_s = args["interval"].as<double>();
    w.format = Format(args);
    w.redraw = isatty(STDOUT_FILENO);
    w.stop = [] { return interrupted != 0; };
    Status s = report::WatchStudy(**db, names[0], w, std::cout);
    return s.ok() ? kOk : Fail(s);
  }
  Status s = names.empty() ? report::ReportStudies(**db, Format(args), std::cout)
                           : report::ReportStudy(**db, names[0], Format(args), std::cout);
  return s.ok() ? kOk : Fail(s);
}

int CmdTrials(int argc, char** argv) {
  cxxopts::Options o("trials", "hyperpack trials STUDY: one row per trial");
  o.custom_help("STUDY [options]");
  AddStorage(o);
  o.add_options()("json", "print JSON");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  Status s = report::ReportTrials(**db, Positional(args)[0], Format(args), std::cout);
  return s.ok() ? kOk : Fail(s);
}

// --within X, when given.
Result<std::optional<report::Tolerance>> Within(const cxxopts::ParseResult& args) {
  if (!args.count("within")) return std::optional<report::Tolerance>();
  HP_ASSIGN_OR_RETURN(report::Tolerance t,
                      report::ParseTolerance(args["within"].as<std::string>()));
  return std::optional<report::Tolerance>(t);
}

int CmdBest(int argc, char** argv) {
  cxxopts::Options o("best", "hyperpack best STUDY: the best completed trial");
  o.custom_help("STUDY [--within X] [options]");
  AddStorage(o);
  o.add_options()("json", "print JSON: {trial, value, params, ...}")(
      "within", "the cheapest trial within X of the best (0.002, or 0.2% of it)",
      cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  auto within = Within(args);
  if (!within.ok()) return Fail(within.status());
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  Status s = report::ReportBest(**db, Positional(args)[0], Format(args), *within, std::cout);
  return s.ok() ? kOk : Fail(s);
}

// Writes `text` beside `target` and renames it there, so a reader never sees half a file.
Status WriteWhole(const std::string& target, const std::string& text) {
  std::string tmp = target + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out << text;
    if (!out.good()) return Status::Io("cannot write ", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) return Status::Io("cannot write ", target, ": ", ec.message());
  return Status::Ok();
}

int CmdExport(int argc, char** argv) {
  cxxopts::Options o("export", "hyperpack export STUDY: the best configuration(s)");
  o.custom_help("STUDY [options]");
  AddStorage(o);
  o.add_options()("format",
                  "yaml | json | env | args, or a launcher's: deepspeed | torchrun | hf | "
                  "lightning | hydra; or optuna-sqlite (with -o FILE.db), tensorboard (with -o "
                  "DIR)",
                  cxxopts::value<std::string>()->default_value("yaml"))(
      "top", "the best K trials", cxxopts::value<int>()->default_value("1"))(
      "trial", "trial N instead of the best", cxxopts::value<int>())(
      "within", "the cheapest trial within X of the best (0.002, or 0.2% of it)",
      cxxopts::value<std::string>())("o,output", "write to FILE instead of standard output",
                                     cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  auto format = report::ParseExportFormat(args["format"].as<std::string>());
  if (!format.ok()) return Fail(format.status());
  auto within = Within(args);
  if (!within.ok()) return Fail(within.status());
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  if (*format == report::ExportFormat::kOptunaSqlite && args.count("output")) {
    std::string target = args["output"].as<std::string>();
    Status s = report::ExportOptunaSqlite(**db, Positional(args)[0], target);
    if (!s.ok()) return Fail(s);
    std::cerr << "wrote " << target << " (optuna.load_study(study_name='" << Positional(args)[0]
              << "', storage='sqlite:///" << target << "'))\n";
    return kOk;
  }
  if (*format == report::ExportFormat::kTensorboard && args.count("output")) {
    std::string target = args["output"].as<std::string>();
    Status s = report::ExportTensorboard(**db, Positional(args)[0], target);
    if (!s.ok()) return Fail(s);
    std::cerr << "wrote " << target << " (tensorboard --logdir " << target << ")\n";
    return kOk;
  }
  std::ostringstream text;
  std::optional<int> trial;
  if (args.count("trial")) trial = args["trial"].as<int>();
  Status s = report::ExportBest(**db, Positional(args)[0], *format, args["top"].as<int>(), trial,
                                *within, text, std::cerr);
  if (!s.ok()) return Fail(s);
  if (!args.count("output")) {
    std::cout << text.str();
    return kOk;
  }
  std::string target = args["output"].as<std::string>();
  if (Status w = WriteWhole(target, text.str()); !w.ok()) return Fail(w);
  std::cerr << "wrote " << target << "\n";
  return kOk;
}

int CmdDashboard(int argc, char** argv) {
  cxxopts::Options o("dashboard",
                     "hyperpack dashboard: every study's page, live, over HTTP (read-only)");
  o.custom_help("[--listen 127.0.0.1:8080] [--token-file FILE] [options]");
  AddStorage(o);
  o.add_options()("listen", "IP:PORT (port 0 picks one); beyond loopback it needs --token-file",
                  cxxopts::value<std::string>()->default_value("127.0.0.1:8080"))(
      "token-file", "a file holding the token every request must carry (?token= or Bearer)",
      cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  hyperpack::dashboard::DashboardOptions d;
  d.listen = args["listen"].as<std::string>();
  d.storage_path = StoragePath(args);
  if (args.count("token-file")) {
    auto token = Token(args);
    if (!token.ok()) return Fail(token.status());
    d.token = *token;
  }
  d.on_listening = [&](const std::string& url) {
    std::cout << "hyperpack dashboard of " << d.storage_path << " on " << url
              << (d.token.empty() ? "" : " (add ?token=YOUR_TOKEN)") << "\n"
              << std::flush;
  };
  d.log = [](const std::string& line) { std::cout << line << "\n" << std::flush; };
  Status s = hyperpack::dashboard::RunDashboard(d);
  return s.ok() ? kOk : Fail(s);
}

int CmdReport(int argc, char** argv) {
  cxxopts::Options o("report",
                     "hyperpack report STUDY -o FILE.html: the study's charts, trials and events "
                     "in one HTML file that opens with no network");
  o.custom_help("STUDY -o FILE.html [options]");
  AddStorage(o);
  o.add_options()("o,output", "the HTML file to write", cxxopts::value<std::string>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  if (!args.count("output"))
    return Fail(Status::Invalid("report: say where to write the page: -o FILE.html"));
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  std::ostringstream page;
  if (Status s = report::WriteStudyPage(**db, Positional(args)[0], page); !s.ok()) return Fail(s);
  std::string target = args["output"].as<std::string>();
  if (Status w = WriteWhole(target, page.str()); !w.ok()) return Fail(w);
  std::cerr << "wrote " << target << " (open it in a browser)\n";
  return kOk;
}

namespace sched = hyperpack::scheduler;

// simulate's flags: --trace replays a workload, --generate writes one.
void AddSimulateOptions(cxxopts::Options& o) {
  o.custom_help(
      "--trace FILE.csv [--cluster 64x8] [--policy best-fit] [--order fifo|sjf] [--aging 1] "
      "[--max-wait 2h | --guard-factor 6] [--critical-first] [--estimate-noise 0] [--json] | "
      "--generate tuning|shared "
      "--jobs N [--seed "
      "S] -o FILE.csv");
  o.add_options()("trace", "the workload to replay", cxxopts::value<std::string>())(
      "cluster", "NODESxGPUS", cxxopts::value<std::string>()->default_value("64x8"))(
      "policy", "best-fit | first-fit | fifo",
      cxxopts::value<std::string>()->default_value("best-fit"))(
      "order", "the queue: fifo (arrival) | sjf (shortest predicted first, with aging)",
      cxxopts::value<std::string>()->default_value("fifo"))(
      "aging", "sjf: seconds of predicted run time forgiven per second waited",
      cxxopts::value<double>()->default_value("1"))(
      "max-wait",
      "sjf: a job that has waited this long (e.g. 2h) goes to the head of the queue; 0: never",
      cxxopts::value<std::string>()->default_value("0"))(
      "guard-factor",
      "sjf without --max-wait: a job that has waited this many times the typical predicted run "
      "time goes to the head (hyperpack run's default is 6); 0: never",
      cxxopts::value<double>()->default_value("0"))(
      "critical-first",
      "sjf: a job that would end after all the work in hand even if it started now goes to the "
      "head (hyperpack run's default)")(
      "estimate-noise",
      "the sd of log(estimate / duration): how wrong the scheduler's estimates are (--seed draws "
      "them)",
      cxxopts::value<double>()->default_value("0"))("json", "print one JSON object")(
      "generate", "write a synthetic workload: tuning | shared", cxxopts::value<std::string>())(
      "jobs", "jobs to generate", cxxopts::value<int>()->default_value("2000"))(
      "seed", "generator seed", cxxopts::value<uint64_t>()->default_value("1"))(
      "o,output", "where --generate writes (default: standard output)",
      cxxopts::value<std::string>());
}

// --generate: a synthetic workload as CSV, to --output or standard output.
int GenerateWorkload(const cxxopts::ParseResult& args) {
  std::string kind = args["generate"].as<std::string>();
  int jobs = args["jobs"].as<int>();
  if (jobs < 1) return Fail(Status::Invalid("--jobs must be >= 1"));
  uint64_t seed = args["seed"].as<uint64_t>();
  std::vector<sched::TraceJob> w;
  if (kind == "tuning") {
    w = sched::TuningWorkload(jobs, seed);
  } else if (kind == "shared") {
    w = sched::SharedClusterWorkload(jobs, seed);
  } else {
    return Fail(Status::Invalid("--generate: '", kind, "'; expected tuning or shared"));
  }
  std::string csv = sched::TraceCsv(w);
  if (!args.count("output")) {
    std::cout << csv;
    return kOk;
  }
  std::ofstream out(args["output"].as<std::string>());
  out << csv;
  return out.good() ? kOk : Fail(Status::Io("cannot write ", args["output"].as<std::string>()));
}

// The cluster (--cluster NODESxGPUS) and the policy (--policy) to replay the workload on.
hyperpack::Result<sched::SimulationOptions> SimulationOptionsFrom(
    const cxxopts::ParseResult& args) {
  sched::SimulationOptions so;
  std::string cluster = args["cluster"].as<std::string>();
  auto x = cluster.find('x');
  auto nodes = x == std::string::npos ? std::nullopt : hyperpack::ParseInt(cluster.substr(0, x));
  auto gpus = x == std::string::npos ? std::nullopt : hyperpack::ParseInt(cluster.substr(x + 1));
  if (!nodes || !gpus || *nodes < 1 || *gpus < 1 || *gpus > 64)
    return Status::Invalid("--cluster: '", cluster, "'; expected NODESxGPUS such as 64x8");
  so.nodes = static_cast<int>(*nodes);
  so.gpus_per_node = static_cast<int>(*gpus);
  auto policy = sched::ParsePolicy(args["policy"].as<std::string>());
  if (!policy.ok()) return policy.status().WithContext("--policy");
  so.policy = *policy;
  auto order = sched::ParseOrder(args["order"].as<std::string>());
  if (!order.ok()) return order.status().WithContext("--order");
  so.queue.order = *order;
  so.queue.aging = args["aging"].as<double>();
  if (!(so.queue.aging >= 0) || !std::isfinite(so.queue.aging))
    return Status::Invalid("--aging: ", so.queue.aging, "; expected a number >= 0, e.g. 1");
  if (std::string w = args["max-wait"].as<std::string>(); w != "0") {
    auto max_wait = hyperpack::ParseDuration(w);
    if (!max_wait.ok()) return max_wait.status().WithContext("--max-wait");
    so.queue.max_wait = *max_wait;
  }
  so.queue.max_wait_factor = args["guard-factor"].as<double>();
  if (!(so.queue.max_wait_factor >= 0) || !std::isfinite(so.queue.max_wait_factor))
    return Status::Invalid("--guard-factor: ", so.queue.max_wait_factor,
                           "; expected a number >= 0, e.g. 6 (0: no guard)");
  so.queue.critical_first = args.count("critical-first") > 0;
  so.estimate_noise = args["estimate-noise"].as<double>();
  if (!(so.estimate_noise >= 0) || so.estimate_noise > 10)
    return Status::Invalid("--estimate-noise: ", so.estimate_noise,
                           "; expected a standard deviation of log error in [0, 10], e.g. 0.5");
  so.noise_seed = args["seed"].as<uint64_t>();
  return so;
}

void PrintSimulationJson(const sched::SimulationResult& r, const sched::SimulationOptions& so) {
  nlohmann::ordered_json j;
  j["jobs"] = r.jobs;
  j["policy"] = sched::PolicyName(so.policy);
  j["order"] = sched::OrderName(so.queue.order);
  j["max_wait"] = so.queue.max_wait;
  j["guard_factor"] = so.queue.max_wait_factor;
  j["critical_first"] = so.queue.critical_first;
  j["estimate_noise"] = so.estimate_noise;
  j["gpus"] = so.nodes * so.gpus_per_node;
  j["gpu_utilisation"] = r.gpu_utilisation;
  j["makespan"] = r.makespan;
  j["lower_bound"] = r.lower_bound;
  j["makespan_ratio"] = r.makespan_ratio;
  j["mean_queueing_delay"] = r.mean_queueing;
  j["p95_queueing_delay"] = r.p95_queueing;
  j["mean_jct"] = r.mean_jct;
  j["p95_jct"] = r.p95_jct;
  j["p99_queueing_delay_longest_tenth"] = r.p99_queueing_longest;
  j["scheduling_passes"] = r.passes;
  j["p99_pass_ms"] = r.p99_pass_ms;
  std::cout << j.dump(2) << "\n";
}

void PrintSimulationTable(const sched::SimulationResult& r, const sched::SimulationOptions& so) {
  std::cout << r.jobs << " jobs on " << so.nodes << " nodes x " << so.gpus_per_node << " GPUs, "
            << sched::PolicyName(so.policy) << ", queue " << sched::OrderName(so.queue.order)
            << (so.queue.max_wait > 0 ? ", max wait " + hyperpack::FormatDuration(so.queue.max_wait)
                : so.queue.max_wait_factor > 0
                    ? ", max wait " + hyperpack::FormatShort(so.queue.max_wait_factor, 3) +
                          "x the typical run time"
                    : std::string())
            << (so.queue.critical_first ? ", critical jobs first" : "")
            << (so.estimate_noise > 0 ? ", estimates off by a factor exp(N(0, " +
                                            hyperpack::FormatShort(so.estimate_noise, 3) + "))"
                                      : std::string())
            << "\n"
            << "GPU utilisation      " << hyperpack::FormatShort(100 * r.gpu_utilisation, 4)
            << "%\n"
            << "makespan             " << hyperpack::FormatDuration(r.makespan) << " ("
            << hyperpack::FormatShort(r.makespan_ratio, 4) << " x the lower bound "
            << hyperpack::FormatDuration(r.lower_bound) << ")\n"
            << "queueing delay       mean " << hyperpack::FormatDuration(r.mean_queueing)
            << ", p95 " << hyperpack::FormatDuration(r.p95_queueing)
            << ", p99 of the longest tenth " << hyperpack::FormatDuration(r.p99_queueing_longest)
            << "\n"
            << "job completion time  mean " << hyperpack::FormatDuration(r.mean_jct) << ", p95 "
            << hyperpack::FormatDuration(r.p95_jct) << "\n"
            << "scheduling           " << r.passes << " passes, p99 "
            << hyperpack::FormatShort(r.p99_pass_ms, 3) << " ms\n";
}

int CmdSimulate(int argc, char** argv) {
  cxxopts::Options o(
      "simulate",
      "hyperpack simulate: replay a workload (CSV: submit_time,duration,gpus) in "
      "virtual time through the scheduler's placement code, or write a synthetic one");
  AddSimulateOptions(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  if (args.count("generate")) return GenerateWorkload(args);
  if (!args.count("trace")) return Fail(Status::Invalid("give --trace FILE.csv or --generate"));
  const std::string path = args["trace"].as<std::string>();
  auto text = ReadFileText(path, "the trace");
  if (!text.ok()) return Fail(text.status());
  auto trace = sched::ParseTrace(*text, path);
  if (!trace.ok()) return Fail(trace.status());
  auto so = SimulationOptionsFrom(args);
  if (!so.ok()) return Fail(so.status());
  so->clock_ms = [] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  auto r = sched::Simulate(*trace, *so);
  if (!r.ok()) return Fail(r.status());
  if (args.count("json")) {
    PrintSimulationJson(*r, *so);
  } else {
    PrintSimulationTable(*r, *so);
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsageText;
    return kUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::cout << kUsageText;
    return kOk;
  }
  if (cmd == "--version" || cmd == "version") {
    std::cout << "hyperpack " << HYPERPACK_VERSION << "\n";
    return kOk;
  }
  // Each command parses its own flags from argv[1..]: argv[1] stands as the program name.
  int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  if (cmd == "run") return CmdRun(sub_argc, sub_argv);
  if (cmd == "validate") return CmdValidate(sub_argc, sub_argv);
  if (cmd == "import") return CmdImport(sub_argc, sub_argv);
  if (cmd == "status") return CmdStatus(sub_argc, sub_argv);
  if (cmd == "trials") return CmdTrials(sub_argc, sub_argv);
  if (cmd == "best") return CmdBest(sub_argc, sub_argv);
  if (cmd == "export") return CmdExport(sub_argc, sub_argv);
  if (cmd == "report") return CmdReport(sub_argc, sub_argv);
  if (cmd == "dashboard") return CmdDashboard(sub_argc, sub_argv);
  if (cmd == "simulate") return CmdSimulate(sub_argc, sub_argv);
  if (cmd == "serve") return CmdServe(sub_argc, sub_argv);
  if (cmd == "agent") return CmdAgent(sub_argc, sub_argv);
  if (cmd == "slurm-task") return CmdSlurmTask(sub_argc, sub_argv);
  std::cerr << "hyperpack: unknown command '" << cmd << "'\n\n" << kUsageText;
  return kUsage;
}
