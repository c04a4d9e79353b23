// The calls that differ between a CPU and a CUDA libtorch, or between libtorch 1.13 and 2.x:
// autocast, device synchronisation, the CUDA caching allocator's statistics and cache. Everything
// else in the trainer is written against libtorch's device-generic API. With a CPU libtorch the
// CUDA functions do nothing (and PeakGpuMb answers nothing).
// Thread-safety: autocast state is per thread; the allocator calls are safe from any thread.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace hyperpack::trainer {

// Autocast on `device`'s type in `dtype` (bf16 or fp16), or off again (then its cast cache is
// cleared). libtorch 2.4 replaced set_enabled/set_cpu_enabled and the per-device dtype setters
// with calls that take the device type; both spellings are handled here.
void SetAutocast(const torch::Device& device, bool on, at::ScalarType dtype);

// Waits until every kernel queued on a CUDA device has run (nothing on the CPU): a wall-clock
// time taken after it counts the GPU's work, not only its launches.
void SynchronizeDevice(const torch::Device& device);

// The most memory tensors held on a CUDA device since ResetPeakGpu (MiB), as PyTorch's
// torch.cuda.max_memory_allocated reports it; nullopt on the CPU or with a CPU libtorch.
std::optional<double> PeakGpuMb(const torch::Device& device);
void ResetPeakGpu(const torch::Device& device);

// The state of a CUDA device's default random generator (what dropout draws from there), to
// checkpoint beside the CPU's; and setting it back.
torch::Tensor GpuRngState(const torch::Device& device);
void SetGpuRngState(const torch::Device& device, const torch::Tensor& state);

// How many GPUs this libtorch sees (0 with a CPU libtorch).
int GpuCount();

// Gives the blocks the caching allocator holds back to the GPU, for another process to use.
void EmptyGpuCache();

}  // namespace hyperpack::trainer
