#include "hyperpack/study/training.h"

#include <cctype>
#include <string>

namespace hyperpack::study {
namespace {

std::string Normalised(const Value& value) {
  std::string name = FormatValue(value);
  for (char& c : name) c = c == '-' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

}  // namespace

std::optional<TrainPrecision> ParsePrecision(const Value& value) {
  const std::string s = Normalised(value);
  if (s == "fp32" || s == "32" || s == "32_true" || s == "float32" || s == "no" || s == "full")
    return TrainPrecision::kFp32;
  if (s == "fp16" || s == "16" || s == "16_mixed" || s == "float16" || s == "half" || s == "amp")
    return TrainPrecision::kFp16;
  if (s == "bf16" || s == "bf16_mixed" || s == "bfloat16") return TrainPrecision::kBf16;
  return std::nullopt;
}

std::optional<Optimizer> ParseOptimizer(const Value& value) {
  const std::string s = Normalised(value);
  if (s == "sgd") return Optimizer::kSgd;
  if (s == "adam") return Optimizer::kAdam;
  if (s == "adamw" || s == "adamw_torch" || s == "adamw_hf") return Optimizer::kAdamW;
  return std::nullopt;
}

}  // namespace hyperpack::study
