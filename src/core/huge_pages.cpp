#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace tessera {

void advise_huge_pages(void* p, size_t n) {
  const uintptr_t begin = align_up(reinterpret_cast<uintptr_t>(p), kHugePageBytes);
  const uintptr_t end = align_down(reinterpret_cast<uintptr_t>(p) + n, kHugePageBytes);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

uint8_t* allocate_for_streaming(size_t n) {
  const size_t align = n >= kHugePageBytes ? kHugePageBytes : 64;
  // aligned_alloc wants a multiple of the alignment; the padding is never written, and no huge page covers it.
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, align_up(n, align)));
  if (p != nullptr) advise_huge_pages(p, n);
  return p;
}

void move_to_huge_pages(uint8_t* p, size_t n) {
  const uintptr_t begin = align_up(reinterpret_cast<uintptr_t>(p), kHugePageBytes);
  const uintptr_t end = align_down(reinterpret_cast<uintptr_t>(p) + n, kHugePageBytes);
  if (end <= begin) return;
  const size_t len = end - begin;
  // Huge pages need 2 MiB-aligned addresses in the new mapping too: over-allocate, then trim both ends.
  void* fresh = ::mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) return;
  const uintptr_t fresh_begin = reinterpret_cast<uintptr_t>(fresh), fresh_end = fresh_begin + len + kHugePageBytes;
  const uintptr_t aligned = align_up(fresh_begin, kHugePageBytes);
  if (aligned > fresh_begin) ::munmap(fresh, aligned - fresh_begin);
  if (fresh_end > aligned + len) ::munmap(reinterpret_cast<void*>(aligned + len), fresh_end - (aligned + len));
  auto* staging = reinterpret_cast<uint8_t*>(aligned);
  ::madvise(staging, len, MADV_HUGEPAGE);
  std::memcpy(staging, reinterpret_cast<const uint8_t*>(begin), len);
  ::mprotect(staging, len, PROT_READ);  // read-only as the mapping it joins; whole huge pages, so none splits
  if (::mremap(staging, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(begin)) == MAP_FAILED) {
    ::munmap(staging, len);
  }
}

}  // namespace tessera
