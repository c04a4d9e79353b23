// A study read whole for a report: its record, its trials and its parsed study file.
// Thread-safety: as Storage, one thread per Storage.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::report {

struct Loaded {
  storage::StudyRecord study;
  std::vector<storage::TrialRecord> trials;
  std::optional<study::StudySpec> spec;  // absent if the stored file no longer parses
};

// Study `name`, or kNotFound naming the closest study there is.
Result<Loaded> Load(storage::Storage& db, const std::string& name);

}  // namespace hyperpack::report
