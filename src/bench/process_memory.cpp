// /proc/self/status parsing.
#include "bench/process_memory.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tessera {

ProcessMemory read_process_memory() {
  ProcessMemory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    uint64_t* field = key == "VmRSS" ? &m.rss : key == "RssAnon" ? &m.rss_anon : key == "RssFile" ? &m.rss_file
                      : key == "VmHWM" ? &m.peak_rss : nullptr;
    if (field != nullptr) *field = std::stoull(line.substr(colon + 1)) * 1024;  // "  1234 kB"
  }
  return m;
}

namespace {

// One /proc/self/smaps entry: its address range, whether a file backs it, and its resident bytes.
struct Mapping {
  uintptr_t begin = 0, end = 0;
  bool anonymous = false;
  uint64_t rss = 0;
};

// The entries that overlap [bytes.data(), bytes.data() + bytes.size()).
std::vector<Mapping> mappings_overlapping(std::span<const uint8_t> bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()), end = begin + bytes.size();
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::vector<Mapping> found;
  bool in_range = false;
  while (std::getline(smaps, line)) {
    // A mapping's header line: "start-end perms offset dev inode   pathname" (hex addresses; inode 0 for
    // anonymous memory); its fields follow as "Key:   value kB".
    const size_t colon = line.find(':');
    const bool is_field = colon != std::string::npos && line.find(' ') > colon;
    if (!is_field) {
      Mapping m;
      char perms[8] = {}, dev[16] = {};
      unsigned long long offset = 0, inode = 1;
      const int n = std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s %llx %15s %llu", &m.begin, &m.end,
                                perms, &offset, dev, &inode);
      in_range = n >= 2 && m.begin < end && m.end > begin;
      if (in_range) {
        m.anonymous = n == 6 && inode == 0;
        found.push_back(m);
      }
    } else if (in_range && line.compare(0, 4, "Rss:") == 0) {
      found.back().rss += std::stoull(line.substr(4)) * 1024;
    }
  }
  return found;
}

}  // namespace

uint64_t resident_bytes_of_mapping(std::span<const uint8_t> bytes) {
  uint64_t total = 0;
  for (const Mapping& m : mappings_overlapping(bytes)) total += m.rss;
  return total;
}

uint64_t anonymous_bytes_of_mapping(std::span<const uint8_t> bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()), end = begin + bytes.size();
  uint64_t total = 0;
  for (const Mapping& m : mappings_overlapping(bytes)) {
    if (m.anonymous) total += std::min(m.end, end) - std::max(m.begin, begin);
  }
  return total;
}

}  // namespace tessera
