// Fuzzes the study-file parser with arbitrary text. A study file is what a user (or a client of
// `hyperpack serve`) hands us, so no text may crash or throw: every problem must come back as a
// Diagnostic.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hyperpack/study/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const hyperpack::study::ParseOutcome outcome = hyperpack::study::ParseStudy(text, "fuzz.yaml");
  // A spec comes back exactly when there are no errors, and every error says something.
  if (outcome.spec.has_value() != outcome.errors.empty()) __builtin_trap();
  for (const hyperpack::study::Diagnostic& d : outcome.errors)
    if (d.ToString().empty()) __builtin_trap();
  return 0;
}
