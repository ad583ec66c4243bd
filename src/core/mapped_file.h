// Read-only memory mapping of a whole file; the bytes stay valid for the object's lifetime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace tessera {

class MappedFile {
 public:
  // Throws tessera::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // Runs fn on a writable view of bytes [offset, offset + n). The mapping is private copy-on-write: each page
  // written becomes this process's own copy in place of the page-cache page (the resident size does not grow),
  // and the file on disk never changes. The pages are read-only again when fn returns.
  void rewrite_private(size_t offset, size_t n, const std::function<void(uint8_t*)>& fn);

  // Moves the whole 2 MiB pages inside bytes [offset, offset + n) to this process's read-only anonymous memory
  // backed by huge pages (core/huge_pages.h), same bytes at the same addresses: for weights the kernels stream
  // every token. The moved pages are no longer shared through the page cache. The file is mapped at a 2 MiB
  // boundary, so that file offsets and huge pages line up.
  void use_huge_pages(size_t offset, size_t n);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tessera
