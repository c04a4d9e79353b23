#include "cli.h"

namespace hyperpack::cli {

namespace {

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

}  // namespace

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
  o.add_options()(
      "storage",
      "a SQLite file, sqlite:///PATH, postgresql://USER@HOST/DB or memory://NAME (default "
      "$HYPERPACK_STORAGE or "
      "./hyperpack.db)",
      cxxopts::value<std::string>());
}

void AddServer(cxxopts::Options& o) {
  o.add_options()("server",
                  "ask hyperpack serve at HOST:PORT (HOST:PORT,HOST:PORT: it and its standbys) "
                  "about a study in its storage",
                  cxxopts::value<std::string>())("token-file", "with --server: the shared token",
                                                 cxxopts::value<std::string>());
  AddTls(o);
}

void AddTls(cxxopts::Options& o) {
  o.add_options()("tls-ca",
                  "certificates instead of TLS from the token: the CA that signed every end's "
                  "(with --tls-cert and --tls-key)",
                  cxxopts::value<std::string>())("tls-cert", "this end's certificate, PEM",
                                                 cxxopts::value<std::string>())(
      "tls-key", "its private key, PEM, mode 600", cxxopts::value<std::string>())(
      "tls-crl", "revoked certificates, PEM", cxxopts::value<std::string>())(
      "insecure", "plaintext, without TLS: only where every end is on a network you trust");
}

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

std::string OptionalString(const cxxopts::ParseResult& args, const char* name) {
  return args.count(name) ? args[name].as<std::string>() : std::string();
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

hyperpack::Result<hyperpack::scheduler::Credentials> ClusterCredentials(
    const cxxopts::ParseResult& args) {
  hyperpack::scheduler::Credentials c;
  HP_ASSIGN_OR_RETURN(c.token, Token(args));
  c.ca_file = OptionalString(args, "tls-ca");
  c.cert_file = OptionalString(args, "tls-cert");
  c.key_file = OptionalString(args, "tls-key");
  c.crl_file = OptionalString(args, "tls-crl");
  c.insecure = args.count("insecure") > 0;
  if (c.insecure && !(c.ca_file + c.cert_file + c.key_file + c.crl_file).empty())
    return Status::Invalid("--insecure and --tls-* contradict each other: choose one");
  return c;
}

hyperpack::Result<std::optional<study::SweepFormat>> SweepFormatArg(
    const cxxopts::ParseResult& args) {
  return study::ParseFromFlag(args.count("from") ? args["from"].as<std::string>() : "auto");
}

study::ImportOptions ImportOptionsArg(const cxxopts::ParseResult& args) {
  study::ImportOptions options;
  if (args.count("command")) options.command = args["command"].as<std::string>();
  return options;
}

Result<hyperpack::scheduler::RunOptions> LocalRunOptions(const cxxopts::ParseResult& args) {
  hyperpack::scheduler::RunOptions ro;
  ro.storage_path = StoragePath(args);
  if (args.count("log-dir")) ro.log_dir = args["log-dir"].as<std::string>();
  HP_ASSIGN_OR_RETURN(ro.progress, ProgressArg(args));
  if (args.count("fake-gpus")) {
    int n = args["fake-gpus"].as<int>();
    if (n < 0 || n > 64) return Status::Invalid("--fake-gpus must be between 0 and 64");
    HP_ASSIGN_OR_RETURN(int64_t mib, FakeGpuMemory(args));
    ro.node = hyperpack::scheduler::FakeGpuNode(n, mib);
  }
  return ro;
}

Result<int64_t> FakeGpuMemory(const cxxopts::ParseResult& args) {
  if (!args.count("fake-gpu-memory")) return int64_t{0};
  if (!args.count("fake-gpus"))
    return Status::Invalid(
        "--fake-gpu-memory goes with --fake-gpus (a real GPU's memory is read "
        "from nvidia-smi)");
  const int64_t mib = args["fake-gpu-memory"].as<int64_t>();
  if (mib <= 0 || mib > int64_t{1} << 30)
    return Status::Invalid("--fake-gpu-memory ", mib,
                           " is out of range; expected MiB above 0, e.g. 81920 for 80 GiB");
  return mib;
}

}  // namespace hyperpack::cli
