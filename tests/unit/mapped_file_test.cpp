// MappedFile: the mapping starts at a 2 MiB boundary, and rewrite_private changes only this process's view.
// use_huge_pages moves a range's whole 2 MiB pages to anonymous memory (core/huge_pages.h) at the same
// addresses: the bytes, the pointers and the file on disk stay as they were, a rewrite lands everywhere in the
// range, and the resident size of the mapping's range does not exceed the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/process_memory.h"
#include "core/huge_pages.h"
#include "core/mapped_file.h"

namespace tessera {
namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  return v;
}

struct TempFile {
  std::string path;
  TempFile(const std::string& stem, const std::vector<uint8_t>& bytes)
      : path(testing::TempDir() + "tessera_" + stem + ".bin") {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::vector<uint8_t> read() const {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

// Whether the mapping holding address p is anonymous: its smaps entry names no file.
bool is_anonymous_mapping_at(const void* p) {
  return anonymous_bytes_of_mapping({static_cast<const uint8_t*>(p), 1}) == 1;
}

TEST(MappedFile, MapsAtHugePageBoundary) {
  const std::vector<uint8_t> bytes = pattern(100000);
  TempFile file("mapped_small", bytes);
  MappedFile mapped(file.path);
  ASSERT_EQ(mapped.bytes().size(), bytes.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapped.bytes().data()) % kHugePageBytes, 0u);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), mapped.bytes().begin()));
}

TEST(MappedFile, HugePagesKeepBytesAddressesAndTheFile) {
  // 7 MiB + a bit; the range starts and ends inside 2 MiB pages, so it has a partial head, whole huge pages in
  // the middle, and a partial tail.
  const size_t n = (size_t{7} << 20) + 12345;
  const std::vector<uint8_t> bytes = pattern(n);
  TempFile file("mapped_large", bytes);
  MappedFile mapped(file.path);
  const uint8_t* base = mapped.bytes().data();
  const size_t offset = 1000, length = n - 3000;
  mapped.use_huge_pages(offset, length);
  EXPECT_EQ(mapped.bytes().data(), base);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), base));
  mapped.rewrite_private(offset, length, [&](uint8_t* p) {
    EXPECT_EQ(p, base + offset);
    // The view holds the file's bytes when fn runs, also in the moved pages.
    EXPECT_TRUE(std::equal(p, p + length, bytes.begin() + offset));
    for (size_t i = 0; i < length; ++i) p[i] = static_cast<uint8_t>(p[i] ^ 0x5a);
  });
  EXPECT_EQ(mapped.bytes().data(), base);
  for (size_t i = 0; i < n; ++i) {
    const bool rewritten = i >= offset && i < offset + length;
    ASSERT_EQ(base[i], rewritten ? static_cast<uint8_t>(bytes[i] ^ 0x5a) : bytes[i]) << "byte " << i;
  }
  EXPECT_EQ(file.read(), bytes);
  // The whole 2 MiB pages left the file: anonymous memory now; the partial head page is still the file's.
  EXPECT_TRUE(is_anonymous_mapping_at(base + kHugePageBytes));
  EXPECT_TRUE(is_anonymous_mapping_at(base + 3 * kHugePageBytes - 1));
  EXPECT_FALSE(is_anonymous_mapping_at(base));
  // Replaced, not duplicated: the range's resident pages are at most the file's size.
  EXPECT_GT(resident_bytes_of_mapping(mapped.bytes()), length / 2);
  EXPECT_LE(resident_bytes_of_mapping(mapped.bytes()), (n + 4095) / 4096 * 4096);
}

TEST(MappedFile, RangeWithoutAWholeHugePageStaysCopyOnWrite) {
  const size_t n = size_t{3} << 20;
  const std::vector<uint8_t> bytes = pattern(n);
  TempFile file("mapped_cow", bytes);
  MappedFile mapped(file.path);
  const uint8_t* base = mapped.bytes().data();
  // 1 MiB inside the first huge page: no whole 2 MiB page to move.
  mapped.use_huge_pages(4096, size_t{1} << 20);
  mapped.rewrite_private(4096, size_t{1} << 20, [](uint8_t* p) { p[0] = static_cast<uint8_t>(p[0] + 1); });
  EXPECT_EQ(base[4096], static_cast<uint8_t>(bytes[4096] + 1));
  EXPECT_FALSE(is_anonymous_mapping_at(base + 4096));
  EXPECT_EQ(file.read(), bytes);
}

TEST(HugePages, AllocationForStreamingIsAlignedAndUsable) {
  for (const size_t n : {size_t{100}, size_t{5} << 20}) {
    uint8_t* p = allocate_for_streaming(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (n >= kHugePageBytes ? kHugePageBytes : 64), 0u);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i);
    EXPECT_EQ(p[n - 1], static_cast<uint8_t>(n - 1));
    std::free(p);
  }
}

}  // namespace
}  // namespace tessera
