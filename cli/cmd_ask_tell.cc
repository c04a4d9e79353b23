// create, ask and tell: a study whose trials the user's own program evaluates.
#include "cli.h"
#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/ask_tell.h"

namespace hyperpack::cli {

namespace {

// The store to write to, its folder made for a file.
Result<std::unique_ptr<hyperpack::storage::Storage>> OpenForWriting(
    const cxxopts::ParseResult& args) {
  const std::string path = StoragePath(args);
  if (auto file = hyperpack::storage::StorageFile(path)) {
    const std::filesystem::path parent = std::filesystem::path(*file).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  }
  return hyperpack::storage::Storage::Open(path);
}

// `--state`: how a trial is told to have ended.
Result<hyperpack::storage::TrialState> TellState(const cxxopts::ParseResult& args) {
  using hyperpack::storage::TrialState;
  if (!args.count("state")) return TrialState::kCompleted;
  const std::string word = args["state"].as<std::string>();
  auto state = hyperpack::storage::ParseTrialState(word);
  if (!state || (*state != TrialState::kFailed && *state != TrialState::kPruned &&
                 *state != TrialState::kInfeasible && *state != TrialState::kCompleted))
    return Status::Invalid("--state '", word, "' is not one of completed, pruned, failed, ",
                           "infeasible");
  return *state;
}

// A trial number given on the command line.
Result<int> TrialNumber(const std::string& text) {
  const std::optional<int64_t> number = ParseInt(text);
  if (!number || *number < 0 || *number > INT32_MAX)
    return Status::Invalid("trial number '", text, "' is not a whole number >= 0");
  return static_cast<int>(*number);
}

}  // namespace

int CmdCreate(int argc, char** argv) {
  cxxopts::Options o("create",
                     "hyperpack create STUDY.yaml: store a study whose trials your program asks "
                     "for (hyperpack ask) and reports (hyperpack tell)");
  o.custom_help("STUDY.yaml [options]");
  AddStorage(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  const std::string path = Positional(args)[0];
  study::ParseOutcome parsed = study::LoadStudyFile(path);
  if (!parsed.warnings.empty()) std::cerr << parsed.WarningText() << "\n";
  if (!parsed.spec) {
    std::cerr << parsed.ErrorText() << "\n";
    return kUsage;
  }
  auto db = OpenForWriting(args);
  if (!db.ok()) return Fail(db.status());
  bool created = false;
  auto study = hyperpack::scheduler::CreateStudy(**db, *parsed.spec, &created);
  if (!study.ok()) return Fail(study.status());
  std::cout << (created ? "created" : "found") << " study '" << study->name << "' in "
            << (*db)->path() << "; ask it for a trial: hyperpack ask " << study->name << "\n";
  return kOk;
}

int CmdAsk(int argc, char** argv) {
  cxxopts::Options o("ask",
                     "hyperpack ask STUDY: reserve the study's next trial and print its number "
                     "and parameters (report it with hyperpack tell)");
  o.custom_help("STUDY [--json] [options]");
  AddStorage(o);
  AddServer(o);
  o.add_options()("json", "print {\"trial\": N, \"params\": {...}}");
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  const std::string name = Positional(args)[0];
  auto asked = [&]() -> Result<hyperpack::scheduler::AskedTrial> {
    if (args.count("server")) {
      HP_ASSIGN_OR_RETURN(auto credentials, ClusterCredentials(args));
      return hyperpack::scheduler::RemoteAsk(args["server"].as<std::string>(), credentials, name);
    }
    HP_ASSIGN_OR_RETURN(auto db, OpenForWriting(args));
    return hyperpack::scheduler::Ask(*db, name, HostName(), WallNow());
  }();
  if (!asked.ok()) return Fail(asked.status());
  if (args.count("json")) {
    nlohmann::ordered_json out;
    out["trial"] = asked->number;
    out["params"] = nlohmann::ordered_json::parse(hyperpack::ConfigToJson(asked->params));
    std::cout << out.dump() << "\n";
    return kOk;
  }
  std::vector<std::string> parts;
  for (const auto& [param, value] : asked->params)
    parts.push_back(param + "=" + hyperpack::FormatValue(value));
  std::cout << "trial " << asked->number << ": " << Join(parts, " ") << "\n";
  return kOk;
}

// --values 'loss=0.31,latency_ms=12': metric=number pairs, each metric once.
Result<std::map<std::string, double>> ParseValues(const std::string& text) {
  std::map<std::string, double> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    if (comma == std::string::npos) comma = text.size();
    const std::string pair(Trim(std::string_view(text).substr(from, comma - from)));
    const size_t eq = pair.find('=');
    char* end = nullptr;
    const double v = eq == std::string::npos ? 0 : std::strtod(pair.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size() || *end != '\0')
      return Status::Invalid(
          "--values: '", pair,
          "' is not METRIC=NUMBER; expected e.g. --values 'loss=0.31,latency_ms=12'");
    if (!out.emplace(std::string(Trim(pair.substr(0, eq))), v).second)
      return Status::Invalid("--values: ", pair.substr(0, eq), " is given twice");
    from = comma + 1;
  }
  return out;
}

int CmdTell(int argc, char** argv) {
  cxxopts::Options o("tell", "hyperpack tell STUDY N --value V: record how an asked trial ended");
  o.custom_help(
      "STUDY N (--value V | --values 'M=V,...') [--step S] | --state failed|infeasible [options]");
  AddStorage(o);
  AddServer(o);
  o.add_options()("value", "the objective's value (completed, or pruned with --state pruned)",
                  cxxopts::value<double>())(
      "values", "several objectives or constraints: each one's value, 'loss=0.31,latency_ms=12'",
      cxxopts::value<std::string>())("state",
                                     "completed (the default), pruned, failed or infeasible",
                                     cxxopts::value<std::string>())(
      "step", "the step the value was measured at", cxxopts::value<int64_t>());
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 2, 2)) return *rc;
  const std::vector<std::string> pos = Positional(args);
  const Result<int> number = TrialNumber(pos[1]);
  if (!number.ok()) return Fail(number.status());
  auto state = TellState(args);
  if (!state.ok()) return Fail(state.status());
  hyperpack::scheduler::Tell tell;
  tell.state = *state;
  if (args.count("value")) tell.value = args["value"].as<double>();
  if (args.count("step")) tell.step = args["step"].as<int64_t>();
  if (args.count("values")) {
    auto values = ParseValues(args["values"].as<std::string>());
    if (!values.ok()) return Fail(values.status());
    tell.values = std::move(*values);
  }
  Status told = [&]() -> Status {
    if (args.count("server")) {
      HP_ASSIGN_OR_RETURN(auto credentials, ClusterCredentials(args));
      return hyperpack::scheduler::RemoteTell(args["server"].as<std::string>(), credentials, pos[0],
                                              *number, tell);
    }
    HP_ASSIGN_OR_RETURN(auto db, OpenForWriting(args));
    return hyperpack::scheduler::TellTrial(*db, pos[0], *number, tell, WallNow());
  }();
  if (!told.ok()) return Fail(told);
  std::cout << "trial " << *number << " of study '" << pos[0]
            << "': " << hyperpack::storage::TrialStateName(tell.state);
  if (tell.value) std::cout << ", value " << FormatDouble(*tell.value);
  for (const auto& [metric, v] : tell.values) std::cout << ", " << metric << " " << FormatDouble(v);
  std::cout << "\n";
  return kOk;
}

int CmdHeartbeat(int argc, char** argv) {
  cxxopts::Options o("heartbeat",
                     "hyperpack heartbeat STUDY N: tell a study with ask_timeout that asked trial "
                     "N is still being evaluated");
  o.custom_help("STUDY N [options]");
  AddStorage(o);
  AddServer(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 2, 2)) return *rc;
  const std::vector<std::string> pos = Positional(args);
  const Result<int> number = TrialNumber(pos[1]);
  if (!number.ok()) return Fail(number.status());
  Status beat = [&]() -> Status {
    if (args.count("server")) {
      HP_ASSIGN_OR_RETURN(auto credentials, ClusterCredentials(args));
      return hyperpack::scheduler::RemoteHeartbeat(args["server"].as<std::string>(), credentials,
                                                   pos[0], *number);
    }
    HP_ASSIGN_OR_RETURN(auto db, OpenForWriting(args));
    return hyperpack::scheduler::HeartbeatTrial(*db, pos[0], *number, WallNow());
  }();
  return beat.ok() ? kOk : Fail(beat);
}

}  // namespace hyperpack::cli
