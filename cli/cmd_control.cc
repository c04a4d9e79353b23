// The lifecycle verbs (stop, cancel, pause, resume, update, enqueue, retry, add-results, delete),
// wait and logs: on a study in this machine's storage, or through `--server` on a server's.
#include <atomic>

#include "cli.h"
#include "hyperpack/scheduler/control.h"

namespace hyperpack::cli {

namespace {

using hyperpack::scheduler::ControlAnswer;
using hyperpack::scheduler::ControlRequest;
using hyperpack::scheduler::Verb;

// What each verb says of itself, and the flags it takes beyond the shared ones.
struct VerbHelp {
  Verb verb;
  const char* usage;
  const char* summary;
};
constexpr VerbHelp kVerbHelp[] = {
    {Verb::kStop, "STUDY", "start no more trials; running ones end as they would"},
    {Verb::kCancel, "STUDY", "stop the running trials too, recorded as cancelled"},
    {Verb::kPause, "STUDY",
     "stop the running trials (they run again from their checkpoints) and start none"},
    {Verb::kResume, "STUDY", "undo a pause"},
    {Verb::kUpdate, "STUDY [--max-trials N] [--max-parallel N] [--time-limit T] [--priority W]",
     "change the budget or priority of a running study (or of its next run)"},
    {Verb::kEnqueue, "STUDY --params JSON|FILE",
     "run these configurations next: a JSON object of parameters, or a list"},
    {Verb::kRetry, "STUDY (--failed | --trial N)",
     "run failed (or timed-out) trials' configurations again, as new trials"},
    {Verb::kAddResults, "STUDY FILE.json|FILE.csv",
     "results evaluated elsewhere, as completed trials the tuner learns from"},
    {Verb::kDelete, "STUDY --yes", "remove a study that is not running, and all it stored"},
};

const VerbHelp& HelpOf(Verb verb) {
  for (const VerbHelp& h : kVerbHelp)
    if (h.verb == verb) return h;
  return kVerbHelp[0];
}

void AddVerbFlags(Verb verb, cxxopts::Options& o) {
  switch (verb) {
    case Verb::kUpdate:
      o.add_options()("max-trials", "the budget's trials", cxxopts::value<int>())(
          "max-parallel", "trials at once", cxxopts::value<int>())(
          "time-limit", "the run's time limit from its start (90m, 2h, 3600)",
          cxxopts::value<std::string>())("priority", "its weight on a shared server",
                                         cxxopts::value<double>());
      break;
    case Verb::kEnqueue:
      o.add_options()("params", "a JSON object of parameters, a list of them, or a file of either",
                      cxxopts::value<std::string>());
      break;
    case Verb::kRetry:
      o.add_options()("failed", "every failed or timed-out trial")(
          "trial", "this trial (repeat for more)", cxxopts::value<std::vector<int>>());
      break;
    case Verb::kDelete:
      o.add_options()("yes", "yes, delete it");
      break;
    default:
      break;
  }
}

// The request from the verb's flags; a usage error as a Status.
Result<ControlRequest> RequestFrom(Verb verb, const cxxopts::ParseResult& args) {
  ControlRequest r;
  r.verb = verb;
  const std::vector<std::string> pos = Positional(args);
  r.study = pos[0];
  switch (verb) {
    case Verb::kUpdate:
      if (args.count("max-trials")) r.max_trials = args["max-trials"].as<int>();
      if (args.count("max-parallel")) r.max_parallel = args["max-parallel"].as<int>();
      if (args.count("priority")) r.priority = args["priority"].as<double>();
      if (args.count("time-limit")) {
        HP_ASSIGN_OR_RETURN(double s, ParseDuration(args["time-limit"].as<std::string>()));
        r.time_limit_s = s;
      }
      break;
    case Verb::kEnqueue: {
      if (!args.count("params")) return Status::Invalid("enqueue: --params JSON|FILE is required");
      std::string text = args["params"].as<std::string>();
      const std::string_view t = Trim(text);
      if (!t.empty() && t.front() != '{' && t.front() != '[') {
        HP_ASSIGN_OR_RETURN(text, ReadFileText(text, "--params file"));
      }
      r.params_json = text;
      break;
    }
    case Verb::kRetry:
      r.retry_failed = args.count("failed") > 0;
      if (args.count("trial")) r.retry_trials = args["trial"].as<std::vector<int>>();
      if (!r.retry_failed && r.retry_trials.empty())
        return Status::Invalid("retry: give --failed, or --trial N");
      break;
    case Verb::kAddResults: {
      if (pos.size() < 2) return Status::Invalid("add-results: give the results file");
      r.results_path = pos[1];
      HP_ASSIGN_OR_RETURN(r.results_text, ReadFileText(pos[1], "results file"));
      break;
    }
    case Verb::kDelete:
      if (!args.count("yes"))
        return Status::Invalid("delete removes study '", r.study,
                               "' and everything it stored; add --yes to do it");
      break;
    default:
      break;
  }
  return r;
}

Result<ControlAnswer> Carry(const ControlRequest& r, const cxxopts::ParseResult& args) {
  if (args.count("server")) {
    HP_ASSIGN_OR_RETURN(auto credentials, ClusterCredentials(args));
    return hyperpack::scheduler::RemoteControl(args["server"].as<std::string>(), credentials, r);
  }
  HP_ASSIGN_OR_RETURN(auto db, hyperpack::storage::Storage::Open(StoragePath(args)));
  return hyperpack::scheduler::ApplyControl(*db, r);
}

int Print(const ControlAnswer& a, bool json) {
  if (json) {
    nlohmann::ordered_json j;
    j["study"] = a.study;
    j["verb"] = hyperpack::scheduler::VerbName(a.verb);
    j["refused"] = a.refused;
    j["kept"] = a.kept;
    j["live"] = a.live;
    j["outcome"] = a.outcome;
    std::cout << j.dump() << "\n";
  } else {
    (a.refused ? std::cerr : std::cout)
        << "study '" << a.study << "': " << (a.refused ? "refused: " : "") << a.outcome << "\n";
  }
  return a.refused ? kFailure : kOk;
}

int CmdVerb(Verb verb, int argc, char** argv) {
  const VerbHelp& help = HelpOf(verb);
  cxxopts::Options o(
      hyperpack::scheduler::VerbName(verb),
      StrCat("hyperpack ", hyperpack::scheduler::VerbName(verb), ": ", help.summary));
  o.custom_help(StrCat(help.usage, " [--json] [options]"));
  AddStorage(o);
  AddServer(o);
  AddVerbFlags(verb, o);
  o.add_options()("json", "print the answer as one JSON object");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, verb == Verb::kAddResults ? 2 : 1)) return *rc;
  auto request = RequestFrom(verb, args);
  if (!request.ok()) {
    std::cerr << "error: " << request.status().message() << "\n";
    return kUsage;
  }
  auto answer = Carry(*request, args);
  if (!answer.ok()) {
    if (answer.status().code() == StatusCode::kInvalidArgument) {
      std::cerr << "error: " << answer.status().message() << "\n";
      return kUsage;
    }
    return Fail(answer.status());
  }
  return Print(*answer, args.count("json") > 0);
}

std::atomic<bool> interrupted{false};
void OnInterrupt(int) { interrupted = true; }

// Where wait and logs read: the server's storage (--server), else this machine's.
struct Source {
  std::string server;
  hyperpack::scheduler::Credentials credentials;
  std::unique_ptr<hyperpack::storage::Storage> db;  // null: the server
};
Result<Source> SourceOf(const cxxopts::ParseResult& args) {
  Source s;
  if (args.count("server")) {
    HP_ASSIGN_OR_RETURN(s.credentials, ClusterCredentials(args));
    s.server = args["server"].as<std::string>();
    return s;
  }
  HP_ASSIGN_OR_RETURN(s.db, OpenForReading(args));
  return s;
}

}  // namespace

int CmdStop(int argc, char** argv) { return CmdVerb(Verb::kStop, argc, argv); }
int CmdCancel(int argc, char** argv) { return CmdVerb(Verb::kCancel, argc, argv); }
int CmdPause(int argc, char** argv) { return CmdVerb(Verb::kPause, argc, argv); }
int CmdResume(int argc, char** argv) { return CmdVerb(Verb::kResume, argc, argv); }
int CmdUpdate(int argc, char** argv) { return CmdVerb(Verb::kUpdate, argc, argv); }
int CmdEnqueue(int argc, char** argv) { return CmdVerb(Verb::kEnqueue, argc, argv); }
int CmdRetry(int argc, char** argv) { return CmdVerb(Verb::kRetry, argc, argv); }
int CmdAddResults(int argc, char** argv) { return CmdVerb(Verb::kAddResults, argc, argv); }
int CmdDelete(int argc, char** argv) { return CmdVerb(Verb::kDelete, argc, argv); }

int CmdWait(int argc, char** argv) {
  cxxopts::Options o("wait",
                     "hyperpack wait STUDY: until the study is over; exit 0 succeeded, 1 failed, "
                     "3 stopped or cancelled, 124 still going at --timeout");
  o.custom_help("STUDY [--timeout SECONDS] [--json] [options]");
  AddStorage(o);
  AddServer(o);
  o.add_options()("timeout", "give up after this long (90s, 2h)", cxxopts::value<std::string>())(
      "json", "print the final condition as one JSON object");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  const std::string name = Positional(args)[0];
  report::WaitOptions wo;
  wo.format = Format(args);
  if (args.count("timeout")) {
    auto t = ParseDuration(args["timeout"].as<std::string>());
    if (!t.ok()) return Fail(t.status());
    wo.timeout_s = *t;
  }
  std::signal(SIGINT, OnInterrupt);
  wo.stop = [] { return interrupted.load(); };
  auto source = SourceOf(args);
  if (!source.ok()) return Fail(source.status());
  Source& s = *source;
  auto code = report::WaitForStudy(
      [&] {
        return s.db ? report::ReadConditions(*s.db, name)
                    : hyperpack::scheduler::RemoteConditions(s.server, s.credentials, name);
      },
      wo, std::cout);
  if (!code.ok()) return Fail(code.status());
  return *code;
}

int CmdLogs(int argc, char** argv) {
  cxxopts::Options o("logs",
                     "hyperpack logs STUDY [N]: the study's event log, or trial N's output");
  o.custom_help("STUDY [N] [-f] [options]");
  AddStorage(o);
  AddServer(o);
  o.add_options()("f,follow", "keep printing what is added, until the study (or trial) ends");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 2)) return *rc;
  const std::vector<std::string> pos = Positional(args);
  std::optional<int> trial;
  if (pos.size() == 2) {
    const std::optional<int64_t> n = ParseInt(pos[1]);
    if (!n || *n < 0 || *n > INT32_MAX)
      return Fail(Status::Invalid("trial number '", pos[1], "' is not a whole number >= 0"));
    trial = static_cast<int>(*n);
  }
  std::signal(SIGINT, OnInterrupt);
  auto source = SourceOf(args);
  if (!source.ok()) return Fail(source.status());
  Source& from = *source;
  auto read = [&](int64_t at) {
    return from.db
               ? report::ReadLogs(*from.db, pos[0], trial, at)
               : hyperpack::scheduler::RemoteLogs(from.server, from.credentials, pos[0], trial, at);
  };
  Status s = report::FollowLogs(
      read, args.count("follow") > 0, 0.5, [] { return interrupted.load(); }, std::cout);
  return s.ok() ? kOk : Fail(s);
}

}  // namespace hyperpack::cli
