#include "int8_wire.h"

#include <algorithm>

namespace hyperpack::trainer {

Int8Layout Int8Layout::For(int64_t values, int64_t max_block) {
  Int8Layout l;
  values = std::max<int64_t>(values, 1);
  l.blocks = (values + max_block - 1) / max_block;
  // Blocks as even as they can be, so that padding stays under 4 elements a block.
  l.block = ((values + l.blocks - 1) / l.blocks + 3) / 4 * 4;
  return l;
}

void QuantizeInt8(const torch::Tensor& values, torch::Tensor residual, const Int8Layout& layout,
                  torch::Tensor segment) {
  torch::NoGradGuard no_grad;
  torch::Tensor x = (values + residual).view({layout.blocks, layout.block});
  torch::Tensor amax = x.abs().amax(1, /*keepdim=*/true);
  torch::Tensor scale = amax / 127;
  // An all-zero block has scale 0 and sends zeros.
  torch::Tensor inv = torch::where(amax > 0, 127 / amax, torch::zeros_like(amax));
  // A non-finite block (scale inf or NaN) sends zeros whose product with its scale is a NaN.
  torch::Tensor q = (x * inv).nan_to_num_(0, 0, 0).round_().clamp_(-127, 127).to(torch::kInt8);
  segment.narrow(0, 0, 4 * layout.blocks).copy_(scale.view({-1}).view(torch::kInt8));
  segment.narrow(0, 4 * layout.blocks, layout.values()).copy_(q.view({-1}));
  residual.copy_((x - q.to(x.scalar_type()) * scale).view({-1}).nan_to_num_(0, 0, 0));
}

torch::Tensor DequantizeInt8(const torch::Tensor& segment, const Int8Layout& layout) {
  torch::NoGradGuard no_grad;
  // A copy, not a view: a segment's scales need not start 4-byte aligned in the received buffer.
  torch::Tensor scale = segment.narrow(0, 0, 4 * layout.blocks).clone().view(torch::kFloat32);
  torch::Tensor q = segment.narrow(0, 4 * layout.blocks, layout.values());
  return (q.to(torch::kFloat32).view({layout.blocks, layout.block}) * scale.view({-1, 1}))
      .view({-1});
}

}  // namespace hyperpack::trainer
