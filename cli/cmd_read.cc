#include "cli.h"

namespace hyperpack::cli {

namespace {

// --within X, when given.
Result<std::optional<report::Tolerance>> Within(const cxxopts::ParseResult& args) {
  if (!args.count("within")) return std::optional<report::Tolerance>();
  HP_ASSIGN_OR_RETURN(report::Tolerance t,
                      report::ParseTolerance(args["within"].as<std::string>()));
  return std::optional<report::Tolerance>(t);
}

// --trial N, --pick CONDITIONS and --by METRIC: one trial chosen, for best and export.
void AddChoiceFlags(cxxopts::Options& o) {
  o.add_options()("pick",
                  "several objectives: the Pareto set's members meeting CONDITIONS "
                  "('val_accuracy>=0.9,latency_ms<20'), of which --by picks one",
                  cxxopts::value<std::string>())(
      "by", "several objectives: pick the member of the Pareto set best by METRIC",
      cxxopts::value<std::string>())(
      "by-model",
      "the trial whose configuration a model of every completed trial recommends (a Gaussian "
      "process that learns how noisy one training's value is), not the best single run");
}

// What --within, --trial, --pick and --by choose (--top for export).
Result<report::Choice> ChoiceOf(const cxxopts::ParseResult& args, bool with_top = false) {
  report::Choice c;
  HP_ASSIGN_OR_RETURN(c.within, Within(args));
  if (args.count("trial")) c.trial = args["trial"].as<int>();
  if (with_top) c.top = args["top"].as<int>();
  c.by_model = args["by-model"].as<bool>();
  if (args.count("pick") || args.count("by")) {
    HP_ASSIGN_OR_RETURN(
        c.pick, report::ParseFrontPick(args.count("pick") ? args["pick"].as<std::string>() : "",
                                       args.count("by") ? args["by"].as<std::string>() : ""));
  }
  return c;
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

}  // namespace

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

int CmdBest(int argc, char** argv) {
  cxxopts::Options o("best", "hyperpack best STUDY: the best completed trial");
  o.custom_help(
      "STUDY [--within X | --pick CONDITIONS --by METRIC | --trial N | --by-model] [options]");
  AddStorage(o);
  o.add_options()("json", "print JSON: {trial, value, params, ...}")(
      "within", "the cheapest trial within X of the best (0.002, or 0.2% of it)",
      cxxopts::value<std::string>())("trial", "trial N, with its values", cxxopts::value<int>());
  AddChoiceFlags(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  auto choice = ChoiceOf(args);
  if (!choice.ok()) return Fail(choice.status());
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  Status s = report::ReportBest(**db, Positional(args)[0], Format(args), *choice, std::cout);
  return s.ok() ? kOk : Fail(s);
}

namespace {

// export --format optuna-sqlite -o FILE [--optuna RELEASE].
int ExportOptunaFile(storage::Storage& db, const cxxopts::ParseResult& args) {
  auto schema = args.count("optuna")
                    ? report::ParseOptunaRelease(args["optuna"].as<std::string>())
                    : Result<report::OptunaSchema>(report::OptunaSchema::kOptuna32);
  if (!schema.ok()) return Fail(schema.status());
  const std::string name = Positional(args)[0], target = args["output"].as<std::string>();
  Status s = report::ExportOptunaSqlite(db, name, target, *schema);
  if (!s.ok()) return Fail(s);
  std::cerr << "wrote " << target << " for " << report::OptunaSchemaReleases(*schema)
            << " (optuna.load_study(study_name='" << name << "', storage='sqlite:///" << target
            << "'))"
            << (*schema == report::OptunaSchema::kOptuna32
                    ? "; for Optuna 3.0 or 3.1, export with --optuna 3.1"
                    : "")
            << "\n";
  return kOk;
}

}  // namespace

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
                                     cxxopts::value<std::string>())(
      "optuna",
      "optuna-sqlite: the Optuna release that will open it (default: 3.2 and later, 4.x and 5.x; "
      "3.1 for Debian bookworm's)",
      cxxopts::value<std::string>());
  AddChoiceFlags(o);
  cxxopts::ParseResult args;
  if (auto rc = Parse(o, argc, argv, &args, 1, 1)) return *rc;
  auto format = report::ParseExportFormat(args["format"].as<std::string>());
  if (!format.ok()) return Fail(format.status());
  if (args.count("optuna") && *format != report::ExportFormat::kOptunaSqlite)
    return Fail(Status::Invalid("--optuna goes with --format optuna-sqlite"));
  auto choice = ChoiceOf(args, /*with_top=*/true);
  if (!choice.ok()) return Fail(choice.status());
  auto db = OpenForReading(args);
  if (!db.ok()) return Fail(db.status());
  if (*format == report::ExportFormat::kOptunaSqlite && args.count("output"))
    return ExportOptunaFile(**db, args);
  if (*format == report::ExportFormat::kTensorboard && args.count("output")) {
    std::string target = args["output"].as<std::string>();
    Status s = report::ExportTensorboard(**db, Positional(args)[0], target);
    if (!s.ok()) return Fail(s);
    std::cerr << "wrote " << target << " (tensorboard --logdir " << target << ")\n";
    return kOk;
  }
  std::ostringstream text;
  Status s = report::ExportBest(**db, Positional(args)[0], *format, *choice, text, std::cerr);
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
  cxxopts::Options o(
      "dashboard", "hyperpack dashboard: every study's page, live, over HTTP or HTTPS (read-only)");
  o.custom_help(
      "[--listen 127.0.0.1:8080] [--token-file FILE --tls-cert FILE --tls-key FILE] [options]");
  AddStorage(o);
  o.add_options()("listen",
                  "IP:PORT (port 0 picks one); beyond loopback it needs --token-file, and "
                  "--tls-cert and --tls-key (or --insecure)",
                  cxxopts::value<std::string>()->default_value("127.0.0.1:8080"))(
      "token-file", "a file holding the token every request must carry (?token= or Bearer)",
      cxxopts::value<std::string>())("tls-cert", "HTTPS: this server's certificate, PEM",
                                     cxxopts::value<std::string>())(
      "tls-key", "its private key, PEM, mode 600", cxxopts::value<std::string>())(
      "tls-ca", "HTTPS with client certificates: the CA that must have signed them",
      cxxopts::value<std::string>())("tls-crl", "revoked client certificates, PEM",
                                     cxxopts::value<std::string>())(
      "insecure", "plain HTTP beyond loopback: only on a network you trust");
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
  d.tls_cert_file = OptionalString(args, "tls-cert");
  d.tls_key_file = OptionalString(args, "tls-key");
  d.tls_ca_file = OptionalString(args, "tls-ca");
  d.tls_crl_file = OptionalString(args, "tls-crl");
  d.insecure = args.count("insecure") > 0;
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

}  // namespace hyperpack::cli
