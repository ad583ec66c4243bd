// mmap-backed file view: model weights are paged in on demand and shared with the page cache.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/huge_pages.h"

namespace tessera {
namespace {

uint8_t* align_up(uint8_t* p, size_t align) {
  return reinterpret_cast<uint8_t*>(tessera::align_up(reinterpret_cast<uintptr_t>(p), align));
}

// Maps `size` bytes of fd read-only at a 2 MiB-aligned address: reserves size + 2 MiB of address space, maps
// the file over its aligned part and returns the slack on either side. MAP_FAILED when either map fails.
void* map_aligned(int fd, size_t size) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t reserved_bytes = size + kHugePageBytes;
  void* reserved = ::mmap(nullptr, reserved_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return MAP_FAILED;
  auto* begin = static_cast<uint8_t*>(reserved);
  uint8_t* aligned = align_up(begin, kHugePageBytes);
  void* p = ::mmap(aligned, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::munmap(reserved, reserved_bytes);
    errno = err;
    return MAP_FAILED;
  }
  uint8_t* mapped_end = align_up(aligned + size, page);
  if (aligned > begin) ::munmap(begin, static_cast<size_t>(aligned - begin));
  uint8_t* reserved_end = begin + reserved_bytes;
  if (reserved_end > mapped_end) ::munmap(mapped_end, static_cast<size_t>(reserved_end - mapped_end));
  return p;
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat '{}': {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = map_aligned(fd, size_);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("cannot map '{}': {}", path, std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps its own reference to the file
}

void MappedFile::rewrite_private(size_t offset, size_t n, const std::function<void(uint8_t*)>& fn) {
  if (offset > size_ || n > size_ - offset) fail("'{}': rewrite of bytes past the end of the mapping", path_);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* base = const_cast<uint8_t*>(data_);
  // The protection changes cover whole 2 MiB pages (within the mapping): changing part of a huge page would
  // split it into 4 KiB pages (use_huge_pages).
  const size_t first = align_down(offset, kHugePageBytes);
  const size_t span = std::min(align_up(size_, page), align_up(offset + n, kHugePageBytes)) - first;
  if (::mprotect(base + first, span, PROT_READ | PROT_WRITE) != 0) {
    fail("cannot make '{}' writable in memory: {}", path_, std::strerror(errno));
  }
  fn(base + offset);
  ::mprotect(base + first, span, PROT_READ);  // should this fail, the pages merely stay writable
}

void MappedFile::use_huge_pages(size_t offset, size_t n) {
  if (offset > size_ || n > size_ - offset) fail("'{}': huge pages for bytes past the end of the mapping", path_);
  move_to_huge_pages(const_cast<uint8_t*>(data_) + offset, n);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tessera
