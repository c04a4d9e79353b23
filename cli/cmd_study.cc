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
  std::cerr << path << ":1:1: warning: read as a " << study::SweepFormatName(*format)
            << " file (--from names the tool)\n";
  return *format;
}

}  // namespace

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
  std::cout << path << ": ok\n\n" << study::DescribeStudy(*parsed.spec);
  return kOk;
}

}  // namespace hyperpack::cli
