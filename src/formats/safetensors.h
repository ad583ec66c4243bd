// safetensors reader (Hugging Face's weight format): one memory-mapped file, or the shards of a folder named by
// model.safetensors.index.json. No model knowledge; src/model maps the names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_type.h"

namespace tessera {

class MappedFile;

struct SafetensorsTensor {
  std::string name;
  TensorType type = TensorType::F32;  // F32, F16 or BF16: the dtypes Tessera computes with
  std::vector<uint64_t> shape;        // safetensors (row-major) order: shape.back() is contiguous
  const uint8_t* data = nullptr;      // into the file's bytes
  uint64_t n_bytes = 0;
  uint64_t n_elements = 0;
};

// One .safetensors file: [u64 little-endian header length N][N bytes of JSON][data]. Every entry of the JSON
// is checked against the data (dtype × shape = the byte range, ranges inside the file, aligned to the
// element, neither overlapping nor leaving holes, as the format requires) before any tensor is handed out, so
// a corrupt or hostile file gives a one-line tessera::Error, never a crash. "__metadata__" is ignored.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (tests, the fuzzer).
  static std::shared_ptr<SafetensorsFile> from_memory(std::span<const uint8_t> bytes, std::string name);

  const std::string& name() const { return name_; }
  uint64_t file_size() const { return bytes_.size(); }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in data order
  const SafetensorsTensor* find(const std::string& name) const;
  // Files opened from disk, when [p, p + n) lies in their bytes: runs fn on a writable view of those bytes in
  // this process's private copy of the mapping (MappedFile::rewrite_private) and returns true; else false.
  bool rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn);

 private:
  SafetensorsFile() = default;
  void parse();

  std::string name_;
  std::shared_ptr<MappedFile> mapping_;  // empty for from_memory
  std::span<const uint8_t> bytes_;
  std::vector<SafetensorsTensor> tensors_;
};

// The weights of a Hugging Face model folder: model.safetensors, or the shards that
// model.safetensors.index.json's weight_map names (every shard must exist and hold the tensors the map
// assigns to it). Tensors point into the shards' mappings, which live as long as this object.
class SafetensorsFolder {
 public:
  // Throws tessera::Error naming the folder, shard or tensor at fault.
  static std::shared_ptr<SafetensorsFolder> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::vector<std::shared_ptr<SafetensorsFile>>& shards() const { return shards_; }
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }  // sorted by name
  const SafetensorsTensor* find(const std::string& name) const;
  // SafetensorsFile::rewrite_private on the shard holding [p, p + n); false when none does.
  bool rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn) const;
  // The shard holding `t`, for messages.
  const std::string& shard_name(const SafetensorsTensor& t) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::vector<const SafetensorsTensor*> tensors_;
  std::vector<size_t> tensor_shard_;  // [tensors_.size()] index into shards_
};

}  // namespace tessera
