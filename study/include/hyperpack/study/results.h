// Results evaluated elsewhere, for `hyperpack add-results`: read from a JSON or CSV file and made
// configurations of the study's space, so that the tuner learns them as completed trials.
//
// JSON: a list of objects, each either {"params": {...}, "value": V} or flat, its parameters and
// the value side by side; the value's key is "value" or the objective's metric. CSV: a header row
// naming the parameters and "value" (or the metric), then a row per result; each cell is read as
// its parameter's type (a categorical cell as the choice it spells). Optuna's
// `study.trials_dataframe().to_csv()` reads as written: params_NAME columns, its state column (only
// COMPLETE rows are results) and its bookkeeping columns (number, times, attributes) passed over.
// Other columns and keys are refused, not guessed at.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::study {

struct PriorResult {
  Config params;  // a configuration of the space (SearchSpace::Conform)
  double value = 0;
  int line = 0;  // where it is in the file (1-based), for messages
};

// *skipped: the rows of a CSV whose state column says the trial did not complete. Errors:
// kInvalidArgument as "PATH:LINE: what is wrong; what would be right", for the first bad result;
// no result is returned then.
Result<std::vector<PriorResult>> ParseResults(const std::string& text, const std::string& path,
                                              const StudySpec& spec, int* skipped = nullptr);

}  // namespace hyperpack::study
