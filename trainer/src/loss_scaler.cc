#include "loss_scaler.h"

#include <torch/version.h>

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

bool FusedUnscaleAvailable(const torch::Device& device) {
  if (device.is_cuda()) return true;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return device.is_cpu();
#else
  return false;
#endif
}

namespace {

// A multiply and a finiteness check per gradient, reduced on the device: a tensor that is true
// where some gradient is not finite, or undefined when there is no gradient.
torch::Tensor UnscaleSeparately(const std::vector<torch::Tensor>& grads, double scale) {
  const double inverse = 1.0 / scale;
  torch::Tensor bad;
  for (const torch::Tensor& g : grads) {
    if (scale != 1.0) g.mul_(inverse);
    torch::Tensor b = torch::logical_not(torch::isfinite(g)).any();
    bad = bad.defined() ? torch::logical_or(bad, b) : b;
  }
  return bad;
}

// One multi-tensor kernel for the gradients of one device (the kernel needs them all on one).
torch::Tensor UnscaleFused(const std::vector<torch::Tensor>& grads, double scale) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(grads[0].device());
  torch::Tensor found_inf = torch::zeros({1}, options);
  torch::Tensor inverse = torch::full({1}, 1.0 / scale, options);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inverse);
  return found_inf.gt(0).any();
}

}  // namespace

bool UnscaleGradients(const std::vector<torch::Tensor>& params, double scale,
                      UnscaleKernel kernel) {
  torch::NoGradGuard no_grad;
  // Grouped by device, in the order first seen; a model is on one device but nothing needs it.
  std::vector<std::vector<torch::Tensor>> groups;
  for (const torch::Tensor& p : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& group) { return group[0].device() == g.device(); });
    if (same == groups.end())
      groups.push_back({g});
    else
      same->push_back(g);
  }
  // Each device's verdict stays there until the one read below.
  std::vector<torch::Tensor> bad;
  for (const std::vector<torch::Tensor>& grads : groups) {
    const bool fused = kernel == UnscaleKernel::kFused ||
                       (kernel == UnscaleKernel::kAuto && FusedUnscaleAvailable(grads[0].device()));
    torch::Tensor b = fused ? UnscaleFused(grads, scale) : UnscaleSeparately(grads, scale);
    bad.push_back(b);
  }
  for (const torch::Tensor& b : bad)
    if (b.item<bool>()) return false;
  return true;
}

}  // namespace hyperpack::trainer
