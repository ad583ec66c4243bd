// This process's memory as the kernel accounts it (/proc/self/status), for resident-weight checks.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

struct ProcessMemory {
  uint64_t rss = 0;       // VmRSS: all resident pages
  uint64_t rss_anon = 0;  // RssAnon: heap, stacks, anonymous mappings
  uint64_t rss_file = 0;  // RssFile: resident pages of mapped files (an mmapped model's weights)
  uint64_t peak_rss = 0;  // VmHWM
};

// Zeros where the kernel does not report a field (or /proc is missing).
ProcessMemory read_process_memory();

// Resident bytes of this process's mappings of the file at `path` (/proc/self/smaps): exactly the pages of an
// mmapped model that are in memory, without the executable's or other files' pages. 0 when not mapped.
uint64_t resident_bytes_of_file_mapping(const std::string& path);

}  // namespace tessera
