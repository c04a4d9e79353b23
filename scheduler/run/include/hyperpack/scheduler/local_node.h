// This machine as the scheduler sees it: its GPUs and CPU slots.
// Thread-safety: DetectLocalNode runs a child process (nvidia-smi); call it before the run starts.
#pragma once

#include <string>
#include <vector>

namespace hyperpack::scheduler {

struct LocalNode {
  std::string name;
  std::vector<std::string> gpus;  // as CUDA_VISIBLE_DEVICES names them
  int cpus = 1;
};

// GPUs from `nvidia-smi --query-gpu=index`, restricted to CUDA_VISIBLE_DEVICES when it is set;
// no GPUs when there is no nvidia-smi or it fails. CPU slots: the cores this process may use.
LocalNode DetectLocalNode();

// A node that pretends to have `gpus` GPUs (named 0 .. gpus-1), for tests and demos.
LocalNode FakeGpuNode(int gpus);

}  // namespace hyperpack::scheduler
