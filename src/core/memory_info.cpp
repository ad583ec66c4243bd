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

// cgroup v2: the tightest of (limit - anonymous memory) over this process's cgroup and its ancestors; 0 when no
// level sets a limit. Page cache counts as free: it is reclaimable, and a model file read before (by this
// process or an earlier one) is charged there; memory.current would refuse every second start. The group's path comes from /proc/self/cgroup ("0::/path"): "/" inside a container's cgroup
// namespace (Kubernetes), a real sub-path on a host (systemd-run -p MemoryMax=..., a manual cgroup).
uint64_t cgroup_anon_bytes(const std::string& dir) {
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key >> value) {
    if (key == "anon") return value;
  }
  return 0;
}

uint64_t cgroup_available() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty() || path[0] != '/') return 0;
  uint64_t tightest = 0;
  for (;;) {
    const std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    std::ifstream max_file(dir + "/memory.max");
    std::string max_text;
    if ((max_file >> max_text) && max_text != "max") {
      const uint64_t limit = std::stoull(max_text), anon = cgroup_anon_bytes(dir);
      const uint64_t left = limit > anon ? limit - anon : 1;  // at the limit: one byte, so nothing fits
      tightest = tightest == 0 ? left : std::min(tightest, left);
    }
    if (path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return tightest;
}

}  // namespace

uint64_t available_memory_bytes() {
  const uint64_t host = meminfo_available(), group = cgroup_available();
  if (host == 0) return group;
  if (group == 0) return host;
  return std::min(host, group);
}

}  // namespace tessera
