// hyperpack: the command line. Parses flags and hands over to the modules; no logic of its own.
//
// Exit codes: 0 ok, 1 runtime failure, 2 usage or validation error, 130 interrupted (Ctrl-C).
#include "cli.h"

namespace hyperpack::cli {

namespace {

// Every command: its usage line and summary (continued over lines at '\n') print the usage, and its
// function runs it. A command without a usage line is internal (slurm-task, run inside Slurm jobs).
struct Command {
  const char* name;
  const char* usage;
  const char* summary;
  int (*run)(int argc, char** argv);
};

const std::vector<Command>& Commands();

// The usage text, from the command table.
std::string UsageText() {
  std::ostringstream out;
  out << "hyperpack: hyperparameter tuning that keeps the GPUs busy\n\n"
      << "usage: hyperpack COMMAND [options]\n\ncommands:\n";
  for (const Command& c : Commands()) {
    if (c.usage == nullptr) continue;
    std::string usage = c.usage;
    usage.resize(std::max<size_t>(usage.size() + 1, 22), ' ');
    std::istringstream summary(c.summary);
    std::string line;
    for (bool first = true; std::getline(summary, line); first = false)
      out << "  " << (first ? usage : std::string(22, ' ')) << line << "\n";
  }
  out << "\nStorage: --storage PATH or URL (sqlite:///PATH, postgresql://USER@HOST/DB, "
         "memory://NAME), else "
         "$HYPERPACK_STORAGE, else ./hyperpack.db.\n"
      << "Run 'hyperpack COMMAND --help' for a command's options.\n";
  return out.str();
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"run", "run STUDY.yaml", "run a study, or resume it if it exists", CmdRun},
      {"validate", "validate STUDY.yaml", "check a study file and print its search space",
       CmdValidate},
      {"import", "import FILE",
       "a W&B sweep or an NNI, Determined or Katib experiment as a study file,\n"
       "or an Optuna study stored with its trials",
       CmdImport},
      {"status", "status [STUDY]", "all studies, or one study's progress (--watch: live)",
       CmdStatus},
      {"trials", "trials STUDY", "one row per trial", CmdTrials},
      {"best", "best STUDY", "the best trial so far", CmdBest},
      {"export", "export STUDY",
       "the best configuration(s) as yaml, json, env or args, or as\n"
       "DeepSpeed, torchrun, Hugging Face, Lightning or Hydra take them,\n"
       "or every trial as an Optuna database",
       CmdExport},
      {"report", "report STUDY",
       "the study's charts, trials and events as one self-contained HTML file", CmdReport},
      {"dashboard", "dashboard", "serve every study's page, live, over HTTP (read-only)",
       CmdDashboard},
      {"create", "create STUDY.yaml",
       "store a study whose trials your own program asks for and tells", CmdCreate},
      {"ask", "ask STUDY", "reserve the next trial: its number and parameters", CmdAsk},
      {"tell", "tell STUDY N", "record how an asked trial ended (--value V, or --state)", CmdTell},
      {"heartbeat", "heartbeat STUDY N", "an asked trial is still being evaluated (ask_timeout)",
       CmdHeartbeat},
      {"stop", "stop STUDY", "start no more trials; running ones end as they would", CmdStop},
      {"cancel", "cancel STUDY", "stop the running trials too, recorded as cancelled", CmdCancel},
      {"pause", "pause STUDY", "stop the running trials until resume (from their checkpoints)",
       CmdPause},
      {"resume", "resume STUDY", "undo a pause", CmdResume},
      {"update", "update STUDY", "change a running study's budget or priority", CmdUpdate},
      {"enqueue", "enqueue STUDY", "run these configurations next (--params JSON|FILE)",
       CmdEnqueue},
      {"retry", "retry STUDY", "run failed trials again (--failed, or --trial N)", CmdRetry},
      {"add-results", "add-results STUDY FILE",
       "results evaluated elsewhere (JSON or CSV), for the tuner", CmdAddResults},
      {"wait", "wait STUDY", "until the study is over; the exit code says how it ended", CmdWait},
      {"logs", "logs STUDY [N]", "the study's events, or trial N's output (-f: follow)", CmdLogs},
      {"delete", "delete STUDY", "remove a study that is not running (--yes)", CmdDelete},
      {"simulate", "simulate", "replay a GPU workload through the placement code in virtual time",
       CmdSimulate},
      {"serve", "serve", "run the scheduler as a daemon that agents join and studies are sent to",
       CmdServe},
      {"agent", "agent", "run on a node: start the ranks the server places there", CmdAgent},
      {"slurm-task", nullptr, nullptr, CmdSlurmTask},
  };
  return kCommands;
}

}  // namespace

}  // namespace hyperpack::cli

using hyperpack::cli::Command;
using hyperpack::cli::Commands;
using hyperpack::cli::kOk;
using hyperpack::cli::kUsage;
using hyperpack::cli::UsageText;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << UsageText();
    return kUsage;
  }
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::cout << UsageText();
    return kOk;
  }
  if (cmd == "--version" || cmd == "version") {
    std::cout << "hyperpack " << HYPERPACK_VERSION << "\n";
    return kOk;
  }
  // Each command parses its own flags from argv[1..]: argv[1] stands as the program name.
  for (const Command& c : Commands())
    if (cmd == c.name) return c.run(argc - 1, argv + 1);
  std::cerr << "hyperpack: unknown command '" << cmd << "'\n\n" << UsageText();
  return kUsage;
}
