// /proc/self/status parsing.
#include "bench/process_memory.h"

#include <filesystem>
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

uint64_t resident_bytes_of_file_mapping(const std::string& path) {
  std::error_code error;
  const std::string target = std::filesystem::canonical(path, error).string();
  if (error) return 0;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_target = false;
  uint64_t total = 0;
  while (std::getline(smaps, line)) {
    // A mapping's header line: "start-end perms offset dev inode   pathname"; its fields follow as "Key: value".
    const size_t colon = line.find(':');
    const bool is_field = colon != std::string::npos && line.find(' ') > colon;
    if (!is_field) {
      const size_t slash = line.find('/');
      in_target = slash != std::string::npos && line.compare(slash, std::string::npos, target) == 0;
    } else if (in_target && line.compare(0, 4, "Rss:") == 0) {
      total += std::stoull(line.substr(4)) * 1024;
    }
  }
  return total;
}

}  // namespace tessera
