#include "attention.h"

#include <torch/version.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace hyperpack::trainer {

bool FusedAttentionAvailable() { return TORCH_VERSION_MAJOR >= 2; }

namespace {

torch::Tensor MathAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            double dropout) {
  const int64_t L = q.size(-2);
  // As libtorch's layer: q is scaled before the product.
  torch::Tensor scores =
      torch::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), k.transpose(-2, -1));
  torch::Tensor future =
      torch::triu(torch::ones({L, L}, q.options().dtype(torch::kBool)), /*diagonal=*/1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  torch::Tensor weights = torch::softmax(scores, -1);
  if (dropout > 0) weights = torch::dropout(weights, dropout, /*train=*/true);
  return torch::matmul(weights, v);
}

}  // namespace

torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, double dropout, AttentionKernel kernel) {
  if (kernel == AttentionKernel::kAuto)
    kernel = FusedAttentionAvailable() ? AttentionKernel::kFused : AttentionKernel::kMath;
  if (kernel == AttentionKernel::kMath) return MathAttention(q, k, v, dropout);
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout, /*is_causal=*/true);
#else
  throw std::logic_error("scaled_dot_product_attention needs libtorch 2.0 or later");
#endif
}

torch::Tensor CausalEncoderLayer(torch::nn::TransformerEncoderLayerImpl& layer,
                                 const torch::Tensor& x, AttentionKernel kernel) {
  torch::nn::MultiheadAttentionImpl& mha = *layer.self_attn;
  const int64_t n = x.size(0), L = x.size(1), d = x.size(2);
  const int64_t heads = mha.options.num_heads(), d_head = d / heads;
  // One projection for q, k and v, split into [3, N, heads, L, d_head].
  torch::Tensor qkv = torch::nn::functional::linear(x, mha.in_proj_weight, mha.in_proj_bias)
                          .view({n, L, 3, heads, d_head})
                          .permute({2, 0, 3, 1, 4});
  const double dropout = layer.is_training() ? mha.options.dropout() : 0.0;
  torch::Tensor a = CausalAttention(qkv[0], qkv[1], qkv[2], dropout, kernel);
  a = mha.out_proj->forward(a.transpose(1, 2).reshape({n, L, d}));
  torch::Tensor h = layer.norm1->forward(x + layer.dropout1->forward(a));
  torch::Tensor f =
      layer.linear2->forward(layer.dropout->forward(torch::relu(layer.linear1->forward(h))));
  return layer.norm2->forward(h + layer.dropout2->forward(f));
}

}  // namespace hyperpack::trainer
