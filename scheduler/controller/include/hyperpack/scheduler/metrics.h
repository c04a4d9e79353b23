// The metrics protocol: how a trial reports progress on its standard output.
//
// A line that is a JSON object reports every numeric member as a metric:
//   {"step": 3, "val_accuracy": 0.88, "train_loss": 0.31}
// `step` (or, where there is none, `epoch`) is the step the values belong to. NaN and Infinity,
// which Python's json module writes, are accepted. Lines of `name=value` tokens, as Kubeflow
// Katib's collector reads them, count too: "epoch=3 accuracy=0.88 loss=0.31"; tokens that are not
// name=number are ignored, so "Epoch 3: accuracy=0.88" reports accuracy. Any other line is output.
//
// A study may also read metrics from lines a script prints its own way (`objective.regex`,
// `trial.metrics`): each pattern is searched for in every line, and its one capture group, when it
// reads as a finite number, is the metric's value.
// Thread-safety: pure functions; a MetricPatterns is immutable and may be shared between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::scheduler {

struct MetricLine {
  std::optional<int64_t> step;   // `step`, or `epoch` where there is no step
  std::optional<int64_t> epoch;  // `epoch` (a pruner's resource)
  std::vector<std::pair<std::string, double>> values;
};

// The metrics on one line of output, or nullopt when the line reports none.
std::optional<MetricLine> ParseMetricLine(std::string_view line);

// A study's metric patterns, compiled (Boost.Regex, Perl syntax, as the study file was checked).
// A search that grows too complex (a pattern that backtracks badly, on a long line) gives up after
// a bounded number of steps, about 0.1 s at worst, and that pattern reports nothing on that line.
class MetricPatterns {
 public:
  MetricPatterns() = default;  // none
  // Each pattern must compile and have exactly one capture group.
  static Result<MetricPatterns> Make(std::span<const study::MetricPattern> patterns);

  bool empty() const;
  // (name, value) for each pattern found in `line` whose group reads as a finite number, in the
  // patterns' order.
  std::vector<std::pair<std::string, double>> Match(std::string_view line) const;

 private:
  struct Compiled;
  std::shared_ptr<const std::vector<Compiled>> compiled_;
};

// As above, and the values `patterns` find: a pattern's value replaces one of the same name on
// the line; patterns named `epoch` and `step` set the epoch and step (whole numbers only), as
// those JSON members do.
std::optional<MetricLine> ParseMetricLine(std::string_view line, const MetricPatterns& patterns);

}  // namespace hyperpack::scheduler
