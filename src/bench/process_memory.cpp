// /proc/self/status parsing.
#include "bench/process_memory.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

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

uint64_t resident_bytes_of_mapping(std::span<const uint8_t> bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()), end = begin + bytes.size();
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_range = false;
  uint64_t total = 0;
  while (std::getline(smaps, line)) {
    // A mapping's header line: "start-end perms offset dev inode   pathname" (hex addresses); its fields
    // follow as "Key:   value kB".
    const size_t colon = line.find(':');
    const bool is_field = colon != std::string::npos && line.find(' ') > colon;
    if (!is_field) {
      uintptr_t vma_begin = 0, vma_end = 0;
      in_range = std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &vma_begin, &vma_end) == 2 &&
                 vma_begin < end && vma_end > begin;
    } else if (in_range && line.compare(0, 4, "Rss:") == 0) {
      total += std::stoull(line.substr(4)) * 1024;
    }
  }
  return total;
}

}  // namespace tessera
