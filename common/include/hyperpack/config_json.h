// JSON encoding of configurations: how parameters are stored in SQLite, handed to a trial
// (HYPERPACK_PARAMS, HYPERPACK_PARAMS_FILE) and printed by `--json` output.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack {

// {"batch_size": 64, "learning_rate": 0.001, "optimizer": "adamw"}; keys in `space` order when a
// space is given, otherwise sorted.
std::string ConfigToJson(const Config& config, const SearchSpace* space = nullptr);

// The names of `config`'s parameters in the order ConfigToJson writes them: `space`'s order, then
// any it does not name, sorted.
std::vector<std::string> ConfigNames(const Config& config, const SearchSpace* space);

// Parses the object written by ConfigToJson. Integers read as int64, other numbers as double.
Result<Config> ConfigFromJson(const std::string& json);

}  // namespace hyperpack
