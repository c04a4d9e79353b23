#include "gpu.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#ifdef HYPERPACK_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

// libtorch 2.4 deprecated the autocast setters without a device type (and later ones drop them).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HYPERPACK_AUTOCAST_BY_DEVICE 1
#endif

namespace hyperpack::trainer {

void SetAutocast(const torch::Device& device, bool on, at::ScalarType dtype) {
#ifdef HYPERPACK_AUTOCAST_BY_DEVICE
  const at::DeviceType type = device.is_cuda() ? at::kCUDA : at::kCPU;
  if (on) at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, on);
#else
  if (device.is_cuda()) {
    if (on) at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(on);
  } else {
    if (on) at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(on);
  }
#endif
  if (!on) at::autocast::clear_cache();
}

void SynchronizeDevice(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

torch::Tensor GpuRngState(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device).get_state();
}

void SetGpuRngState(const torch::Device& device, const torch::Tensor& state) {
  at::Generator gen = at::globalContext().defaultGenerator(device);  // a handle to the global one
  gen.set_state(state);
}

int GpuCount() { return static_cast<int>(torch::cuda::device_count()); }

#ifdef HYPERPACK_WITH_CUDA
namespace {
// The caching allocator knows a device only once libtorch has initialised CUDA, which it does at
// the first CUDA tensor (before that it answers "Invalid device argument"); a device without an
// index is the current one.
c10::DeviceIndex Initialised(const torch::Device& device) {
  torch::empty({1}, torch::TensorOptions().device(device));
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
}  // namespace

std::optional<double> PeakGpuMb(const torch::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  // allocated_bytes[0]: the aggregate over small and large pools (StatType::AGGREGATE), whose
  // enum moved namespaces between libtorch 1.13 and 2.x.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(Initialised(device));
  return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
}

void ResetPeakGpu(const torch::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(Initialised(device));
}

void EmptyGpuCache() { c10::cuda::CUDACachingAllocator::emptyCache(); }
#else
std::optional<double> PeakGpuMb(const torch::Device&) { return std::nullopt; }
void ResetPeakGpu(const torch::Device&) {}
void EmptyGpuCache() {}
#endif

}  // namespace hyperpack::trainer
