// GGUF v3 writer used by convert, quantize and make-model. Tensor bytes are produced lazily, one tensor at a
// time, so a multi-gigabyte model is written without holding it in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor_type.h"
#include "formats/gguf.h"

namespace tessera::gguf {

class Writer {
 public:
  // Fills exactly `n_bytes` at `dst` with the tensor's data.
  using TensorProducer = std::function<void(uint8_t* dst, uint64_t n_bytes)>;

  explicit Writer(uint64_t alignment = 32) : alignment_(alignment) {}

  void set(const std::string& key, Value value);
  void set_string(const std::string& key, std::string v) { set(key, Value::make_string(std::move(v))); }
  void set_u32(const std::string& key, uint32_t v) { set(key, Value::make_u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, Value::make_i32(v)); }
  void set_f32(const std::string& key, float v) { set(key, Value::make_f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, Value::make_bool(v)); }
  void set_string_array(const std::string& key, const std::vector<std::string>& values);
  void set_f32_array(const std::string& key, const std::vector<float>& values);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& values);

  // dims in GGUF order (dims[0] contiguous).
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims, TensorProducer produce);
  void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims, std::vector<uint8_t> bytes);

  // Writes to a temporary file beside `path` and renames it into place, so a failure leaves no partial output.
  // `on_tensor(i, n)` is called after each tensor is written (progress reporting). Throws tessera::Error.
  void write(const std::string& path, const std::function<void(size_t, size_t)>& on_tensor = {}) const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> dims;
    uint64_t n_bytes;
    TensorProducer produce;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tessera::gguf
