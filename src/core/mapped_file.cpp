// mmap-backed file view: model weights are paged in on demand and shared with the page cache.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tessera {

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
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
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
  uint8_t* first = base + offset / page * page;
  const size_t span = offset + n - static_cast<size_t>(first - base);
  if (::mprotect(first, span, PROT_READ | PROT_WRITE) != 0) {
    fail("cannot make '{}' writable in memory: {}", path_, std::strerror(errno));
  }
  fn(base + offset);
  ::mprotect(first, span, PROT_READ);  // should this fail, the pages merely stay writable
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tessera
