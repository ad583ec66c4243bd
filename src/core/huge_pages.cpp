#include "core/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

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

namespace {

// len bytes (a multiple of the page size) of fresh anonymous memory at a 2 MiB-aligned address, advised for huge
// pages (which need aligned addresses): over-allocates by 2 MiB, then trims both ends. nullptr on failure.
uint8_t* map_huge_page_aligned(size_t len) {
  void* fresh = ::mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) return nullptr;
  const uintptr_t fresh_begin = reinterpret_cast<uintptr_t>(fresh), fresh_end = fresh_begin + len + kHugePageBytes;
  const uintptr_t aligned = align_up(fresh_begin, kHugePageBytes);
  if (aligned > fresh_begin) ::munmap(fresh, aligned - fresh_begin);
  if (fresh_end > aligned + len) ::munmap(reinterpret_cast<void*>(aligned + len), fresh_end - (aligned + len));
  ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

void move_to_huge_pages(uint8_t* p, size_t n) {
  const uintptr_t begin = align_up(reinterpret_cast<uintptr_t>(p), kHugePageBytes);
  const uintptr_t end = align_down(reinterpret_cast<uintptr_t>(p) + n, kHugePageBytes);
  if (end <= begin) return;
  const size_t len = end - begin;
  uint8_t* staging = map_huge_page_aligned(len);
  if (staging == nullptr) return;
  std::memcpy(staging, reinterpret_cast<const uint8_t*>(begin), len);
  ::mprotect(staging, len, PROT_READ);  // read-only as the mapping it joins; whole huge pages, so none splits
  if (::mremap(staging, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(begin)) == MAP_FAILED) {
    ::munmap(staging, len);
  }
}

AnonymousMemory::AnonymousMemory(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes > SIZE_MAX / 2) throw std::bad_alloc();  // no address space holds it, and rounding up would wrap
  mapped_ = align_up(bytes, page);
  data_ = map_huge_page_aligned(mapped_);
  if (data_ == nullptr) throw std::bad_alloc();
}

AnonymousMemory::~AnonymousMemory() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

}  // namespace tessera
