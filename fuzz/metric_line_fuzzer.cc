// Fuzzes the metric-line parser: every line a trial prints goes through it, inside the scheduler's
// process, so no line may crash it. Each line is parsed as it is, and again through a study's
// metric patterns (objective.regex, trial.metrics), one of which backtracks badly on purpose: its
// search must give up within its bound, not hang the fuzzer into its timeout.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/study/spec.h"

namespace {

const hyperpack::scheduler::MetricPatterns& Patterns() {
  static const hyperpack::scheduler::MetricPatterns patterns = [] {
    const std::vector<hyperpack::study::MetricPattern> spec = {
        {"accuracy", R"(Accuracy: (\d+)/10000)"},
        {"loss", R"(loss[=:]\s*([-+0-9.eE]+|nan|inf))"},
        {"step", R"(^Step (\d+))"},
        {"slow", R"(^((?:a|aa|a?a)+)+b)"},
    };
    hyperpack::Result<hyperpack::scheduler::MetricPatterns> made =
        hyperpack::scheduler::MetricPatterns::Make(spec);
    if (!made.ok()) __builtin_trap();
    return *std::move(made);
  }();
  return patterns;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  // The contract, both ways: nullopt when the line reports no metric.
  const std::optional<hyperpack::scheduler::MetricLine> plain =
      hyperpack::scheduler::ParseMetricLine(line);
  if (plain && plain->values.empty()) __builtin_trap();
  const std::optional<hyperpack::scheduler::MetricLine> matched =
      hyperpack::scheduler::ParseMetricLine(line, Patterns());
  if (matched && matched->values.empty()) __builtin_trap();
  return 0;
}
