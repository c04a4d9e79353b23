// Fuzzes the metric-line parser: every line a trial prints goes through it, inside the scheduler's
// process, so no line may crash it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hyperpack/scheduler/metrics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const std::optional<hyperpack::scheduler::MetricLine> m =
      hyperpack::scheduler::ParseMetricLine(line);
  // The contract: nullopt when the line reports no metric.
  if (m && m->values.empty()) __builtin_trap();
  return 0;
}
