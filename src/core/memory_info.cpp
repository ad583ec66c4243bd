#include "core/memory_info.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace tessera {
namespace {

uint64_t meminfo_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// cgroup v2: the limit minus what the group already uses; "max" (no limit) or no cgroup file gives 0.
uint64_t cgroup_available() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  uint64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return 0;
  const uint64_t limit = std::stoull(max_text);
  return limit > current ? limit - current : 1;  // at the limit: one byte, so nothing fits
}

}  // namespace

uint64_t available_memory_bytes() {
  const uint64_t host = meminfo_available(), group = cgroup_available();
  if (host == 0) return group;
  if (group == 0) return host;
  return std::min(host, group);
}

}  // namespace tessera
