#include "loss_scaler.h"

#include <algorithm>

namespace hyperpack::trainer {

LossScalePolicy::LossScalePolicy(LossScaleOptions options) : options_(options) {
  state_.scale = options_.initial;
}

StepAction LossScalePolicy::Update(bool gradients_finite) {
  if (gradients_finite) {
    state_.skipped_in_a_row = 0;
    if (options_.dynamic && ++state_.clean_steps >= options_.growth_interval) {
      state_.scale *= options_.growth_factor;
      state_.clean_steps = 0;
    }
    return StepAction::kApply;
  }
  ++state_.skipped_steps;
  state_.clean_steps = 0;
  const bool at_floor = !options_.dynamic || state_.scale <= options_.min_scale;
  if (options_.dynamic)
    state_.scale = std::max(options_.min_scale, state_.scale * options_.backoff_factor);
  // Skips count towards giving up only once lowering the scale can no longer help.
  state_.skipped_in_a_row = at_floor ? state_.skipped_in_a_row + 1 : 0;
  return state_.skipped_in_a_row >= options_.give_up_after ? StepAction::kGiveUp
                                                           : StepAction::kSkip;
}

bool UnscaleGradients(const std::vector<torch::Tensor>& params, double scale) {
  torch::NoGradGuard no_grad;
  const double inverse = 1.0 / scale;
  torch::Tensor bad;
  for (const torch::Tensor& p : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (scale != 1.0) g.mul_(inverse);
    // Reduced on the device and read once below: no synchronising read per parameter.
    torch::Tensor b = torch::logical_not(torch::isfinite(g)).any();
    bad = bad.defined() ? torch::logical_or(bad, b) : b;
  }
  return !bad.defined() || !bad.item<bool>();
}

}  // namespace hyperpack::trainer
