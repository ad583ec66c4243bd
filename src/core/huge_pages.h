// Transparent huge pages for weights the kernels stream. Decoding reads every weight once per token; with 4 KiB
// pages each 4 KiB of weights costs a TLB miss and a page walk, with 2 MiB pages almost none (measured with
// bench/matmul_roofline_bench at one token, 2 threads: Q8_0 and Q4_0 products 10-25% more GB/s, and the read
// probe as much). Linux grants them to anonymous memory that asks (MADV_HUGEPAGE) when THP is in "madvise" or
// "always" mode; elsewhere these calls change nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// x rounded up / down to a multiple of align.
inline uintptr_t align_up(uintptr_t x, size_t align) { return (x + align - 1) / align * align; }
inline uintptr_t align_down(uintptr_t x, size_t align) { return x / align * align; }

// Asks for huge pages on the whole 2 MiB pages inside [p, p + n) only: a partly used huge page at either end
// would make up to 2 MiB resident that holds no weights. Best effort, before the memory is first touched.
void advise_huge_pages(void* p, size_t n);

// n bytes (free() them), 2 MiB-aligned and advised for huge pages when n spans at least one huge page, else
// 64-byte aligned. nullptr when out of memory.
uint8_t* allocate_for_streaming(size_t n);

// Replaces the whole 2 MiB pages inside [p, p + n) of a private mapping with read-only anonymous memory holding
// the same bytes, advised for huge pages. mremap moves the new pages over the old ones at the same addresses, so pointers
// into the range stay valid, and the old pages leave the resident set. Best effort: on any failure the range
// keeps its pages. Only the 2 MiB-aligned part of the range can move, so map files at 2 MiB boundaries.
void move_to_huge_pages(uint8_t* p, size_t n);

// Zero-filled memory that becomes resident only where it is written: an anonymous mapping, whose pages the kernel
// fills with zeros on first touch, 2 MiB-aligned and advised for huge pages. A large buffer that is mostly idle
// at first (the KV cache) then costs neither start-up time nor resident memory until it is used; a zero-filled
// std::vector of 2.75 GiB took 7 s to build here and was resident at once.
class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  // Throws std::bad_alloc when the address space cannot hold `bytes`.
  explicit AnonymousMemory(size_t bytes);
  ~AnonymousMemory();
  AnonymousMemory(AnonymousMemory&& other) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // whole pages mapped at data_
};

}  // namespace tessera
