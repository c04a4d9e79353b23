#include "cli.h"

namespace hyperpack::cli {

namespace {

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
  if (*format != study::SweepFormat::kOptuna)  // told by its bytes, not guessed from keys
    std::cerr << path << ":1:1: warning: read as a " << study::SweepFormatName(*format)
              << " file (--from names the tool)\n";
  return *format;
}

// Writes the study file to -o, or to standard output when there is none.
Status WriteStudyFile(const cxxopts::ParseResult& args, const std::string& yaml) {
  if (!args.count("output")) {
    std::cout << yaml;
    return Status::Ok();
  }
  const std::string target = args["output"].as<std::string>();
  std::ofstream out(target, std::ios::trunc);
  out << yaml;
  if (!out.good()) return Status::Io("cannot write ", target);
  return Status::Ok();
}

// import of an Optuna storage: the study file written, the study and its trials stored.
int ImportOptuna(const cxxopts::ParseResult& args, const std::string& path) {
  auto studies = report::ReadOptunaStorage(path);
  if (!studies.ok()) return Fail(studies.status());
  auto chosen = study::ChooseOptunaStudy(
      *std::move(studies), args.count("study") ? args["study"].as<std::string>() : "", path);
  if (!chosen.ok()) return Fail(chosen.status());
  study::OptunaImportOptions options{path, ImportOptionsArg(args).command,
                                     args["trials"].as<int>()};
  auto imported = study::ImportOptunaStudy(*chosen, options);
  if (!imported.ok()) return Fail(imported.status());
  for (const std::string& w : imported->warnings) std::cerr << path << ": warning: " << w << "\n";
  const std::string file = args.count("output") ? args["output"].as<std::string>() : "study.yaml";
  study::ParseOutcome parsed = study::ParseStudy(imported->study_yaml, file);
  if (!parsed.spec) {
    std::cerr << parsed.ErrorText() << "\n";
    return kUsage;
  }
  if (Status w = WriteStudyFile(args, imported->study_yaml); !w.ok()) return Fail(w);
  auto db = OpenForWriting(args);
  if (!db.ok()) return Fail(db.status());
  auto stored = hyperpack::scheduler::StoreImportedStudy(**db, *parsed.spec, imported->trials,
                                                         imported->waiting);
  if (!stored.ok()) return Fail(stored.status());
  std::vector<std::string> counts;
  for (const auto& [state, n] : stored->counts)
    counts.push_back(StrCat(n, " ", storage::TrialStateName(state)));
  std::cerr << "imported Optuna study '" << chosen->name << "' into " << (*db)->path() << " as '"
            << stored->study.name << "': " << imported->trials.size()
            << (imported->trials.size() == 1 ? " trial (" : " trials (") << Join(counts, ", ")
            << ")" << (stored->queued ? StrCat(", ", stored->queued, " queued to run first") : "")
            << "\n"
            << (parsed.spec->trial.command.empty()
                    ? StrCat("go on with hyperpack ask ", stored->study.name,
                             ", or add trial.command to ", file, " and hyperpack run it")
                    : StrCat("go on with hyperpack run ", file))
            << "\n";
  return kOk;
}

}  // namespace

int CmdImport(int argc, char** argv) {
  cxxopts::Options o("import",
                     "hyperpack import FILE: another tool's sweep as a study file, or an Optuna "
                     "study stored with its trials");
  o.custom_help(
      "FILE [--from auto|wandb|nni|determined|katib|optuna] [--command CMD] [-o STUDY.yaml]");
  AddStorage(o);
  o.add_options()("from",
                  "the tool: wandb (a sweep), nni, determined or katib (an experiment), optuna "
                  "(an RDB SQLite file or a JournalStorage file); auto tells it from the file",
                  cxxopts::value<std::string>()->default_value("auto"))(
      "o,output", "write to FILE instead of standard output", cxxopts::value<std::string>())(
      "command",
      "the trial's command in place of the file's, with {param} placeholders: for a Determined "
      "Trial class, a container that gives only args, a Launch sweep, or an Optuna study",
      cxxopts::value<std::string>())("study",
                                     "optuna: which study of the storage (where it holds several)",
                                     cxxopts::value<std::string>())(
      "trials", "optuna: how many trials the budget allows beyond the imported ones",
      cxxopts::value<int>()->default_value("20"));
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
  if (*format == study::SweepFormat::kOptuna) return ImportOptuna(args, path);
  study::ImportOutcome imported = study::ImportSweep(*text, path, *format, ImportOptionsArg(args));
  for (const study::Diagnostic& d : imported.warnings) std::cerr << d.ToString() << "\n";
  if (!imported.errors.empty()) {
    for (const study::Diagnostic& d : imported.errors) std::cerr << d.ToString() << "\n";
    return kUsage;
  }
  if (Status w = WriteStudyFile(args, imported.study_yaml); !w.ok()) return Fail(w);
  if (args.count("output"))
    std::cerr << "wrote " << args["output"].as<std::string>()
              << " (check it with: hyperpack validate " << args["output"].as<std::string>()
              << ")\n";
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
  std::cout << path << ": ok\n\n" << study::DescribeStudy(*parsed.spec);
  return kOk;
}

}  // namespace hyperpack::cli
