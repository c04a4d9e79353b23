// The training vocabulary that the study file and the launcher exports share: a precision and an
// optimizer, parsed once from the spellings people write in their own tools (Lightning's
// "16-mixed", Hugging Face's "adamw_torch", Accelerate's "no", ...).
// Thread-safety: pure functions over values.
#pragma once

#include <optional>

#include "hyperpack/space.h"

namespace hyperpack::study {

enum class TrainPrecision { kFp32, kFp16, kBf16 };

// The optimizers the launchers' configurations can name.
enum class Optimizer { kSgd, kAdam, kAdamW };

// Case and '-' versus '_' do not matter; nullopt for anything else.
std::optional<TrainPrecision> ParsePrecision(const Value& value);
std::optional<Optimizer> ParseOptimizer(const Value& value);

}  // namespace hyperpack::study
