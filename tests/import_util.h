// What the importers' tests share: a file imported and parsed back as a study, its parameters by
// name, and its diagnostics as text.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hyperpack/study/import.h"

namespace hyperpack::study::testing {

// `text` imported from `filename` in `format` and parsed; fails the test when either step has
// errors. The import's outcome (its warnings) goes to `outcome` when given.
inline StudySpec ImportedAs(const std::string& text, const std::string& filename,
                            SweepFormat format, ImportOutcome* outcome = nullptr,
                            const ImportOptions& options = {}) {
  ImportOutcome out = ImportSweep(text, filename, format, options);
  if (outcome) *outcome = out;
  EXPECT_TRUE(out.errors.empty()) << (out.errors.empty() ? "" : out.errors[0].ToString());
  ParseOutcome parsed = ParseStudy(out.study_yaml, "imported.yaml");
  EXPECT_TRUE(parsed.errors.empty()) << parsed.ErrorText() << "\n" << out.study_yaml;
  return parsed.spec.value_or(StudySpec());
}

inline const ParamSpec& Param(const StudySpec& s, const std::string& name) {
  const ParamSpec* p = s.space.Find(name);
  EXPECT_NE(p, nullptr) << name;
  static const ParamSpec kNone;
  return p ? *p : kNone;
}

inline std::string Text(const std::vector<Diagnostic>& diagnostics) {
  std::string all;
  for (const Diagnostic& d : diagnostics) all += d.ToString() + "\n";
  return all;
}

}  // namespace hyperpack::study::testing
