#include "hyperpack/scheduler/local_node.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

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

}  // namespace

LocalNode DetectLocalNode() {
  LocalNode node;
  node.name = HostName();
  node.cpus = CpuSlots();
  std::vector<std::string> found;
  if (FILE* p = popen("nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null", "r")) {
    std::string out;
    char buf[256];
    while (fgets(buf, sizeof(buf), p)) out += buf;
    if (pclose(p) == 0) found = Split(out, '\n');
  }
  const char* visible = std::getenv(env::kCudaVisibleDevices);
  if (visible != nullptr) {
    // Only the devices this process was given, in the order it was given them.
    std::vector<std::string> allowed = Split(visible, ',');
    std::vector<std::string> kept;
    for (const std::string& id : allowed)
      for (const std::string& f : found)
        if (f == id) kept.push_back(id);
    found = kept;
  }
  node.gpus = found;
  return node;
}

LocalNode FakeGpuNode(int gpus) {
  LocalNode node;
  node.name = HostName();
  node.cpus = CpuSlots();
  for (int i = 0; i < gpus; ++i) node.gpus.push_back(std::to_string(i));
  return node;
}

}  // namespace hyperpack::scheduler
