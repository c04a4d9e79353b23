#include "hyperpack/scheduler/local_node.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <tuple>
#include <utility>

#include "hyperpack/env_vars.h"
#include "hyperpack/host.h"

namespace hyperpack::scheduler {
namespace {

int CpuSlots() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) {
    while (!item.empty() && (item.back() == ' ' || item.back() == '\r')) item.pop_back();
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// nvidia-smi's "index, memory.total" lines (MiB, no units): the GPUs' indices, and the smallest
// memory among them (a node states one figure for all its GPUs); 0 where none is given.
std::pair<std::vector<std::string>, int64_t> ParseGpuLines(const std::vector<std::string>& lines) {
  std::vector<std::string> ids;
  int64_t memory = 0;
  for (const std::string& line : lines) {
    std::vector<std::string> cells = Split(line, ',');
    if (cells.empty()) continue;
    ids.push_back(cells[0]);
    const int64_t mib = cells.size() > 1 ? std::atoll(cells[1].c_str()) : 0;
    memory = ids.size() == 1 ? mib : std::min(memory, mib);
  }
  return {ids, std::max<int64_t>(0, memory)};
}

}  // namespace

LocalNode DetectLocalNode() {
  LocalNode node;
  node.name = HostName();
  node.cpus = CpuSlots();
  std::vector<std::string> lines;
  if (FILE* p = popen(
          "nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits 2>/dev/null",
          "r")) {
    std::string out;
    char buf[256];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    if (pclose(p) == 0) lines = Split(out, '\n');
  }
  const char* visible = std::getenv(env::kCudaVisibleDevices);
  if (visible != nullptr) {
    // Only the devices this process was given, in the order it was given them.
    std::vector<std::string> kept;
    for (const std::string& id : Split(visible, ','))
      for (const std::string& line : lines)
        if (Split(line, ',').front() == id) kept.push_back(line);
    lines = kept;
  }
  std::tie(node.gpus, node.gpu_memory_mb) = ParseGpuLines(lines);
  return node;
}

LocalNode FakeGpuNode(int gpus, int64_t gpu_memory_mb) {
  LocalNode node;
  node.name = HostName();
  node.cpus = CpuSlots();
  for (int i = 0; i < gpus; ++i) node.gpus.push_back(std::to_string(i));
  node.gpu_memory_mb = gpus > 0 ? gpu_memory_mb : 0;
  return node;
}

}  // namespace hyperpack::scheduler
