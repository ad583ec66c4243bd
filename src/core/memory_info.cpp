#include "core/memory_info.h"

#include <algorithm>
#include <fstream>
#include <sstream>
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

// Page cache counts as free: it is reclaimable, and a model file read before (by this process or an earlier
// one) is charged there, so "current usage" would refuse every second start. Only anonymous memory is used.
uint64_t stat_value(const std::string& dir, const std::string& wanted) {
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key >> value) {
    if (key == wanted) return value;
  }
  return 0;
}

struct CgroupLayout {
  std::string limit_file;  // "memory.max" (v2) or "memory.limit_in_bytes" (v1)
  std::string anon_key;    // memory.stat key of the anonymous memory charged to the group (and, v1, below it)
  std::string mount;       // where the hierarchy of this controller is mounted, under the cgroup root
};

// Walks from the process's group up to the root, keeping the tightest (limit - anon). A v1 group without a
// limit reports a huge number (PAGE_COUNTER_MAX pages); anything at or above 2^60 counts as unlimited.
uint64_t tightest_left(std::string path, const std::string& root, const CgroupLayout& layout) {
  uint64_t tightest = 0;
  for (;;) {
    const std::string dir = root + layout.mount + (path == "/" ? std::string() : path);
    std::ifstream limit_file(dir + "/" + layout.limit_file);
    std::string text;
    if ((limit_file >> text) && text != "max") {
      uint64_t limit = 0;
      try {
        limit = std::stoull(text);
      } catch (const std::exception&) {
        limit = 0;  // unreadable: no limit known at this level
      }
      if (limit > 0 && limit < (uint64_t{1} << 60)) {
        const uint64_t anon = stat_value(dir, layout.anon_key);
        const uint64_t left = limit > anon ? limit - anon : 1;  // at the limit: one byte, so nothing fits
        tightest = tightest == 0 ? left : std::min(tightest, left);
      }
    }
    if (path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return tightest;
}

}  // namespace

uint64_t cgroup_available_bytes(const std::string& self_cgroup, const std::string& cgroup_root) {
  // Lines are "hierarchy-id:controllers:path": "0::/path" for v2, "N:memory:/path" (controllers comma-separated)
  // for v1. The path is "/" inside a container's cgroup namespace, a real sub-path on a host.
  std::ifstream self(self_cgroup);
  std::string line, v2_path, v1_path;
  while (std::getline(self, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      v2_path = path;
    } else {
      std::stringstream list(controllers);
      std::string c;
      while (std::getline(list, c, ','))
        if (c == "memory") v1_path = path;
    }
  }
  uint64_t left = 0;
  const auto keep = [&left](uint64_t v) {
    if (v > 0) left = left == 0 ? v : std::min(left, v);
  };
  if (!v1_path.empty()) keep(tightest_left(v1_path, cgroup_root, {"memory.limit_in_bytes", "total_rss", "/memory"}));
  if (!v2_path.empty()) keep(tightest_left(v2_path, cgroup_root, {"memory.max", "anon", ""}));
  return left;
}

uint64_t available_memory_bytes() {
  const uint64_t host = meminfo_available(), group = cgroup_available_bytes("/proc/self/cgroup", "/sys/fs/cgroup");
  if (host == 0) return group;
  if (group == 0) return host;
  return std::min(host, group);
}

}  // namespace tessera
