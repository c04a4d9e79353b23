// The metrics protocol: how a trial reports progress on its standard output.
//
// A line that is a JSON object reports every numeric member as a metric:
//   {"step": 3, "val_accuracy": 0.88, "train_loss": 0.31}
// `step` (or, where there is none, `epoch`) is the step the values belong to. NaN and Infinity,
// which Python's json module writes, are accepted. Lines of `name=value` tokens, as Kubeflow
// Katib's collector reads them, count too: "epoch=3 accuracy=0.88 loss=0.31"; tokens that are not
// name=number are ignored, so "Epoch 3: accuracy=0.88" reports accuracy. Any other line is output.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hyperpack::scheduler {

struct MetricLine {
  std::optional<int64_t> step;   // `step`, or `epoch` where there is no step
  std::optional<int64_t> epoch;  // `epoch` (a pruner's resource)
  std::vector<std::pair<std::string, double>> values;
};

// The metrics on one line of output, or nullopt when the line reports none.
std::optional<MetricLine> ParseMetricLine(std::string_view line);

}  // namespace hyperpack::scheduler
