// Datasets, loaded whole into memory: Fashion-MNIST (IDX files, gzipped or not), CSV tables, and
// plain text for the character language model.
// Errors name the file and what was expected. Thread-safety: plain values after loading.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "hyperpack/status.h"

namespace hyperpack::trainer {

struct Dataset {
  torch::Tensor x;  // [N, ...]: float features or images, or int64 token ids [N, L]
  torch::Tensor y;  // [N] int64 class ids, or [N, L] next-token ids
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  // Rows `index` (an int64 tensor of row numbers, on any device).
  Dataset Select(const torch::Tensor& index) const;
  Dataset To(const torch::Device& device) const;
};

struct DataSplits {
  Dataset train, val;
  std::optional<Dataset> test;
  int64_t classes = 0;               // output width (the vocabulary for text)
  std::vector<int64_t> input_shape;  // one sample, e.g. {1, 28, 28} or {features}
  bool sequence = false;             // y is [N, L]
  DataSplits To(const torch::Device& device) const;
};

Result<DataSplits> LoadData(const TrainerConfig& config);

// Reads one IDX file (uint8 data), gzipped or not: the tensor has the file's dimensions.
Result<torch::Tensor> ReadIdx(const std::string& path);

}  // namespace hyperpack::trainer
