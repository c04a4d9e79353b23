// Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler and DeepSpeed do it: the
// loss is multiplied by a scale before backward so that small fp16 gradients do not flush to
// zero; the gradients are divided by it again before the optimizer sees them. A step whose
// gradients hold an inf or a NaN is skipped and the scale halved; after `growth_interval` clean
// steps in a row the scale doubles.
//
// LossScalePolicy is the decision alone (pure: no tensors, no clock), so that it is tested with
// injected overflows on any machine; UnscaleGradients is the tensor half. Scales are powers of two
// by default, so that scaling and unscaling an fp32 gradient is exact.
// Thread-safety: plain values, one training thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace hyperpack::trainer {

struct LossScaleOptions {
  bool dynamic = true;  // false: a static scale, never changed (steps are still skipped)
  double initial = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // clean steps in a row before the scale grows
  double min_scale = 1.0;          // halving stops here (DeepSpeed's min_loss_scale)
  // Consecutive skipped steps at min_scale after which the run gives up: the gradients are not
  // finite at any scale, so the model has diverged.
  int64_t give_up_after = 50;
};

enum class StepAction {
  kApply,   // the gradients are finite: take the optimizer step
  kSkip,    // an inf or NaN: skip the step (the scale was lowered)
  kGiveUp,  // kSkip too many times in a row at the smallest scale
};

class LossScalePolicy {
 public:
  // What a checkpoint keeps, so that a resumed run continues with the scale it had.
  struct State {
    double scale = 0;
    int64_t clean_steps = 0;  // in a row, since the last growth or skip
    int64_t skipped_steps = 0;
    int64_t skipped_in_a_row = 0;
  };

  explicit LossScalePolicy(LossScaleOptions options);

  double scale() const { return state_.scale; }
  const State& state() const { return state_; }
  void Restore(const State& state) { state_ = state; }

  // Called once per optimizer step with whether that step's (unscaled) gradients were all finite.
  StepAction Update(bool gradients_finite);

 private:
  LossScaleOptions options_;
  State state_;
};

// How the gradients are unscaled and checked. kFused is one multi-tensor kernel per device
// (at::_amp_foreach_non_finite_check_and_unscale_, what torch.amp.GradScaler calls); kSeparate
// is a multiply and a finiteness check per gradient. Both give the same values and verdict.
enum class UnscaleKernel { kAuto, kSeparate, kFused };

// Whether this libtorch has the fused kernel for `device`: CUDA always; the CPU from 2.4 on.
bool FusedUnscaleAvailable(const torch::Device& device);

// Multiplies every defined gradient by 1 / scale in place and says whether all of them are finite
// (one read from the device for the whole model). kAuto takes the fused kernel where this libtorch
// has it for the gradients' device; kFused where it has not throws c10::Error.
bool UnscaleGradients(const std::vector<torch::Tensor>& params, double scale,
                      UnscaleKernel kernel = UnscaleKernel::kAuto);

}  // namespace hyperpack::trainer
