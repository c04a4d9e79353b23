#include "cli.h"

namespace hyperpack::cli {

namespace {

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

// `run --server`: the study goes to hyperpack serve, and its progress comes back.
int SubmitToServer(const cxxopts::ParseResult& args, const study::StudySpec& spec,
                   const std::string& path, std::optional<int> max_trials,
                   std::optional<int> max_parallel) {
  hyperpack::scheduler::SubmitOptions so;
  so.server = args["server"].as<std::string>();
  auto credentials = ClusterCredentials(args);
  if (!credentials.ok()) return Fail(credentials.status());
  so.credentials = *credentials;
  so.study_text = spec.source_text;
  so.study_path = std::filesystem::absolute(path).string();
  so.max_trials = max_trials;
  so.max_parallel = max_parallel;
  auto code = hyperpack::scheduler::SubmitStudy(so);
  if (!code.ok()) return Fail(code.status());
  return *code;
}

// run's flags.
cxxopts::Options RunOptionsSpec() {
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
      "fake-gpu-memory", "with --fake-gpus: each one's memory, in MiB (default: not known)",
      cxxopts::value<int64_t>())(
      "server",
      "submit to hyperpack serve at HOST:PORT and follow the run; HOST:PORT,HOST:PORT: a server "
      "and its standbys, tried in turn",
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
  AddTls(o);
  return o;
}

}  // namespace

int CmdRun(int argc, char** argv) {
  cxxopts::Options o = RunOptionsSpec();
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
  if (Status runnable = study::CheckRunnable(*parsed.spec); !runnable.ok()) return Fail(runnable);
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
  AddTls(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  auto credentials = ClusterCredentials(args);
  if (!credentials.ok()) return Fail(credentials.status());
  hyperpack::scheduler::ServeOptions so;
  so.listen = args["listen"].as<std::string>();
  so.credentials = *credentials;
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
  o.add_options()("connect",
                  "the server, HOST:PORT; or HOST:PORT,HOST:PORT: a server and its standbys",
                  cxxopts::value<std::string>())("token-file", "the shared token",
                                                 cxxopts::value<std::string>())(
      "name", "this node's name (default: the host name)", cxxopts::value<std::string>())(
      "fake-gpus", "pretend to have N GPUs (tests and demos)", cxxopts::value<int>())(
      "fake-gpu-memory", "with --fake-gpus: each one's memory, in MiB (default: not known)",
      cxxopts::value<int64_t>())("heartbeat", "seconds between heartbeats",
                                 cxxopts::value<double>()->default_value("5"));
  AddTls(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 0, 0)) return *rc;
  if (!args.count("connect")) return Fail(Status::Invalid("--connect HOST:PORT is required"));
  auto credentials = ClusterCredentials(args);
  if (!credentials.ok()) return Fail(credentials.status());
  hyperpack::scheduler::AgentOptions ao;
  ao.connect = args["connect"].as<std::string>();
  ao.credentials = *credentials;
  if (args.count("name")) ao.name = args["name"].as<std::string>();
  if (args.count("fake-gpus")) ao.fake_gpus = args["fake-gpus"].as<int>();
  if (args.count("fake-gpu-memory")) {
    auto mib = hyperpack::cli::FakeGpuMemory(args);
    if (!mib.ok()) return Fail(mib.status());
    ao.fake_gpu_memory_mb = *mib;
  }
  ao.heartbeat_s = args["heartbeat"].as<double>();
  if (!(ao.heartbeat_s > 0) || ao.heartbeat_s > 3600)
    return Fail(Status::Invalid("--heartbeat ", args["heartbeat"].as<double>(),
                                " is out of range; expected seconds in (0, 3600], e.g. 5"));
  Status s = hyperpack::scheduler::RunAgent(ao);
  return s.ok() ? kOk : Fail(s);
}

}  // namespace hyperpack::cli
