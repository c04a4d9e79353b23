// Fuzzes the reading of an Optuna JournalStorage file and the import of what it holds
// (study/optuna.h): a journal is a file someone hands `hyperpack import`, so no bytes may crash or
// throw. Every study replayed is imported; the study file of each import that succeeds is parsed
// (its errors, if any, are diagnostics like any study file's).
#include <cstddef>
#include <cstdint>
#include <string>

#include "hyperpack/study/optuna.h"
#include "hyperpack/study/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto studies = hyperpack::study::ParseOptunaJournal(text, "fuzz.log");
  if (!studies.ok()) {
    if (studies.status().message().empty()) __builtin_trap();  // an error says something
    return 0;
  }
  for (const hyperpack::study::OptunaStudy& study : *studies) {
    auto imported = hyperpack::study::ImportOptunaStudy(study, {"fuzz.log", "true", 3});
    if (!imported.ok()) continue;
    const hyperpack::study::ParseOutcome parsed =
        hyperpack::study::ParseStudy(imported->study_yaml, "fuzz.yaml");
    if (parsed.spec.has_value() != parsed.errors.empty()) __builtin_trap();
  }
  return 0;
}
