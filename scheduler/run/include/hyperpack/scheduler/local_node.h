// This machine as the scheduler sees it: its GPUs and CPU slots.
// Thread-safety: DetectLocalNode runs a child process (nvidia-smi); call it before the run starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hyperpack::scheduler {

struct LocalNode {
  std::string name;
  std::vector<std::string> gpus;  // as CUDA_VISIBLE_DEVICES names them
  int cpus = 1;
  int64_t gpu_memory_mb = 0;  // each GPU's (the smallest of them); 0: not known
};

// GPUs and their memory from `nvidia-smi --query-gpu=index,memory.total`, restricted to
// CUDA_VISIBLE_DEVICES when it is set; no GPUs when there is no nvidia-smi or it fails. CPU slots:
// the cores this process may use.
LocalNode DetectLocalNode();

// A node that pretends to have `gpus` GPUs (named 0 .. gpus-1) of `gpu_memory_mb` each (0: not
// known), for tests and demos.
LocalNode FakeGpuNode(int gpus, int64_t gpu_memory_mb = 0);

}  // namespace hyperpack::scheduler
