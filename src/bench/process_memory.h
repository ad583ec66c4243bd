// This process's memory as the kernel accounts it (/proc/self/status), for resident-weight checks.
#pragma once

#include <cstdint>
#include <span>
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

// Resident bytes of this process's mappings that lie in [bytes.data(), bytes.data() + bytes.size()), from
// /proc/self/smaps: for a mapped model file, exactly its pages in memory, those still the file's and those
// rewritten for the kernels alike (copy-on-write pages, and the huge pages that replace whole 2 MiB stretches:
// core/huge_pages.h), without the executable's, the heap's or other files' pages.
uint64_t resident_bytes_of_mapping(std::span<const uint8_t> bytes);

// Bytes of [bytes.data(), bytes.data() + bytes.size()) that anonymous mappings (no file behind them) cover:
// in a mapped model file, the stretches moved to huge pages (MappedFile::use_huge_pages).
uint64_t anonymous_bytes_of_mapping(std::span<const uint8_t> bytes);

}  // namespace tessera
