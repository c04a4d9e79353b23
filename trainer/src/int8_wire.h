// Gradients as 8-bit integers with a scale per block, and the error feedback that keeps their
// long-run sum exact (grad_compression: int8; ddp.h sends them).
//
// A segment holds `blocks` fp32 scales (their bytes first, so a segment is one int8 tensor that
// one collective moves) and then blocks x block int8 values: value = q * scale, with q in
// [-127, 127] and scale = the block's largest magnitude / 127. Rounding to nearest loses up to half
// a step per element; error feedback adds what was lost to the next step's values before they are
// rounded, so over many steps the error of the sum stays within one step instead of growing.
// A non-finite value (an fp16 overflow) makes its block's scale non-finite, arrives as a NaN for
// the loss scaler to see, and is not carried into the residual.
// Thread-safety: pure functions on tensors the caller owns.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace hyperpack::trainer {

struct Int8Layout {
  // Fits `values` elements in blocks of at most `max_block`, a multiple of 4 long (so that every
  // segment's scales stay 4-byte aligned when segments are laid end to end).
  static Int8Layout For(int64_t values, int64_t max_block = 256);
  int64_t block = 4;
  int64_t blocks = 1;
  int64_t values() const { return block * blocks; }
  int64_t bytes() const { return 4 * blocks + values(); }
};

// Rounds `values` + `residual` (fp32, layout.values() long) into `segment` (int8, layout.bytes()
// long) and leaves in `residual` (in place: it may be a view) what the rounding lost.
void QuantizeInt8(const torch::Tensor& values, torch::Tensor residual, const Int8Layout& layout,
                  torch::Tensor segment);
// The fp32 values a segment holds (layout.values() long).
torch::Tensor DequantizeInt8(const torch::Tensor& segment, const Int8Layout& layout);

}  // namespace hyperpack::trainer
