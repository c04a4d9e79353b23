// The char transformer's encoder layer, run on the parameters of libtorch's
// TransformerEncoderLayer (so checkpoints, initialisation and the optimizer's parameter order stay
// as they were) with attention on at::scaled_dot_product_attention where libtorch is 2.x.
//
// libtorch's own layer (1.13 and 2.x) computes attention in C++ with the L x L scores written
// out and the batch second; Python's 2.x layer calls scaled_dot_product_attention, whose fused
// kernels (flash, memory-efficient) never hold the scores. kMath is today's layer's arithmetic
// written out, kept for libtorch 1.13 and as the reference the fused path is tested against.
// Thread-safety: none; one training thread, as for any torch module.
#pragma once

#include <torch/torch.h>

namespace hyperpack::trainer {

enum class AttentionKernel {
  kAuto,   // kFused where this libtorch has it, else kMath
  kFused,  // at::scaled_dot_product_attention, causal (libtorch 2.x)
  kMath,   // softmax(q k^T / sqrt(d_head) + causal mask) v, with the scores held
};

// Whether this libtorch has at::scaled_dot_product_attention (2.0 on).
bool FusedAttentionAvailable();

// Causal attention of q, k, v, each [N, heads, L, d_head], with dropout on the attention weights
// when dropout > 0. kFused where it is not available throws std::logic_error.
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, double dropout, AttentionKernel kernel);

// One post-norm encoder layer with a causal mask over x, [N, L, d] (batch first), as
// `layer.forward(x.transpose(0, 1), causal_mask).transpose(0, 1)` computes it; dropout where the
// layer is in training mode. The layer must have the default activation (ReLU).
torch::Tensor CausalEncoderLayer(torch::nn::TransformerEncoderLayerImpl& layer,
                                 const torch::Tensor& x, AttentionKernel kernel);

}  // namespace hyperpack::trainer
