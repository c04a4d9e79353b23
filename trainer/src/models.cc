#include "models.h"

#include <torch/script.h>

#include "attention.h"

namespace hyperpack::trainer {
namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, const std::vector<int64_t>& widths, int64_t out, double dropout) {
    int64_t prev = in;
    for (size_t i = 0; i < widths.size(); ++i) {
      layers->push_back(torch::nn::Linear(prev, widths[i]));
      layers->push_back(torch::nn::ReLU());
      if (dropout > 0) layers->push_back(torch::nn::Dropout(dropout));
      prev = widths[i];
    }
    layers->push_back(torch::nn::Linear(prev, out));
    register_module("layers", layers);
  }
  torch::Tensor forward(const torch::Tensor& x) { return layers->forward(x.flatten(1)); }
  torch::nn::Sequential layers;
};
TORCH_MODULE(Mlp);

struct CnnImpl : torch::nn::Module {
  CnnImpl(int64_t channels_in, int64_t height, int64_t width, const std::vector<int64_t>& channels,
          bool batch_norm, double dropout, int64_t out) {
    int64_t c = channels_in, h = height, w = width;
    for (int64_t next : channels) {
      features->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c, next, 3).padding(1)));
      if (batch_norm) features->push_back(torch::nn::BatchNorm2d(next));
      features->push_back(torch::nn::ReLU());
      features->push_back(torch::nn::MaxPool2d(2));
      c = next;
      h /= 2;
      w /= 2;
    }
    head->push_back(torch::nn::Flatten());
    head->push_back(torch::nn::Linear(c * h * w, 128));
    head->push_back(torch::nn::ReLU());
    if (dropout > 0) head->push_back(torch::nn::Dropout(dropout));
    head->push_back(torch::nn::Linear(128, out));
    register_module("features", features);
    register_module("head", head);
  }
  torch::Tensor forward(const torch::Tensor& x) { return head->forward(features->forward(x)); }
  torch::nn::Sequential features, head;
};
TORCH_MODULE(Cnn);

struct CharLmImpl : torch::nn::Module {
  CharLmImpl(int64_t vocab, int64_t seq_len, int64_t d, int64_t layers, int64_t heads,
             double dropout)
      : tokens(register_module("tokens", torch::nn::Embedding(vocab, d))),
        positions(register_module("positions", torch::nn::Embedding(seq_len, d))),
        encoder(register_module("encoder",
                                torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
                                    torch::nn::TransformerEncoderLayer(
                                        torch::nn::TransformerEncoderLayerOptions(d, heads)
                                            .dim_feedforward(4 * d)
                                            .dropout(dropout)),
                                    layers)))),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        out(register_module("out", torch::nn::Linear(d, vocab))) {}

  torch::Tensor forward(const torch::Tensor& x) {  // x: [N, L] token ids
    const int64_t L = x.size(1);
    auto pos = torch::arange(L, torch::TensorOptions().dtype(torch::kInt64).device(x.device()));
    auto h = tokens->forward(x) + positions->forward(pos).unsqueeze(0);  // [N, L, d]
    // Each position sees itself and the past only; fused attention where libtorch is 2.x.
    for (const auto& layer : *encoder->layers)
      h = CausalEncoderLayer(*layer->as<torch::nn::TransformerEncoderLayer>(), h,
                             AttentionKernel::kAuto);
    return out->forward(norm->forward(h));  // [N, L, vocab]
  }
  torch::nn::Embedding tokens, positions;
  torch::nn::TransformerEncoder encoder;
  torch::nn::LayerNorm norm;
  torch::nn::Linear out;
};
TORCH_MODULE(CharLm);

// A torch::nn module holder as a Model.
template <typename Holder>
class NnModel : public Model {
 public:
  explicit NnModel(Holder module) : module_(std::move(module)) {}
  torch::Tensor Forward(const torch::Tensor& x) override { return module_->forward(x); }
  std::vector<torch::Tensor> Parameters() override { return module_->parameters(); }
  std::vector<torch::Tensor> Buffers() override { return module_->buffers(); }
  void Train(bool on) override { module_->train(on); }
  void To(const torch::Device& device) override { module_->to(device); }

 private:
  Holder module_;
};

class ScriptModel : public Model {
 public:
  explicit ScriptModel(torch::jit::Module module) : module_(std::move(module)) {}
  torch::Tensor Forward(const torch::Tensor& x) override { return module_.forward({x}).toTensor(); }
  std::vector<torch::Tensor> Parameters() override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.parameters()) out.push_back(p);
    return out;
  }
  std::vector<torch::Tensor> Buffers() override {
    std::vector<torch::Tensor> out;
    for (const auto& b : module_.buffers()) out.push_back(b);
    return out;
  }
  void Train(bool on) override { module_.train(on); }
  void To(const torch::Device& device) override { module_.to(device); }

 private:
  torch::jit::Module module_;
};

}  // namespace

Result<std::unique_ptr<Model>> MakeModel(const TrainerConfig& c, const DataSplits& data) {
  if (!c.model_file.empty()) {
    try {
      torch::jit::Module m = torch::jit::load(c.model_file);
      for (auto p : m.parameters()) p.set_requires_grad(true);
      return std::unique_ptr<Model>(new ScriptModel(std::move(m)));
    } catch (const std::exception& e) {
      return Status::Invalid(c.model_file, ": not a TorchScript module torch::jit::load can read: ",
                             std::string(e.what()).substr(0, 300));
    }
  }
  if (c.model == ModelKind::kCharLm) {
    return std::unique_ptr<Model>(new NnModel<CharLm>(
        CharLm(data.classes, c.seq_len, c.d_model, c.layers, c.heads, c.dropout)));
  }
  if (data.sequence) return Status::Invalid("model ", Name(c.model), " cannot train on text");
  if (c.model == ModelKind::kCnn) {
    if (data.input_shape.size() != 3)
      return Status::Invalid("model cnn needs images (--data fmnist), not a table");
    return std::unique_ptr<Model>(
        new NnModel<Cnn>(Cnn(data.input_shape[0], data.input_shape[1], data.input_shape[2],
                             c.cnn_channels, c.batch_norm, c.dropout, data.classes)));
  }
  int64_t in = 1;
  for (int64_t d : data.input_shape) in *= d;
  return std::unique_ptr<Model>(new NnModel<Mlp>(Mlp(in, c.mlp_widths, data.classes, c.dropout)));
}

}  // namespace hyperpack::trainer
