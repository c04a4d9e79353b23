// The models hyperpack-trainer trains: an MLP, a small convnet, a tiny character transformer, or a
// user's TorchScript module. One interface over torch::nn and torch::jit modules.
// Thread-safety: one thread (the training loop) per model.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "config.h"
#include "data.h"
#include "hyperpack/status.h"

namespace hyperpack::trainer {

class Model {
 public:
  virtual ~Model() = default;
  // Logits: [N, classes], or [N, L, vocab] for sequences.
  virtual torch::Tensor Forward(const torch::Tensor& x) = 0;
  virtual std::vector<torch::Tensor> Parameters() = 0;
  virtual std::vector<torch::Tensor> Buffers() = 0;
  virtual void Train(bool on) = 0;
  virtual void To(const torch::Device& device) = 0;
};

// The model the config asks for, shaped for the data. Errors: a TorchScript file that cannot be
// loaded, a model that does not fit the data (a convnet on a table).
Result<std::unique_ptr<Model>> MakeModel(const TrainerConfig& config, const DataSplits& data);

}  // namespace hyperpack::trainer
