// GGUF v3 serialization (little-endian, as every GGUF consumer expects).
#include "formats/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "core/error.h"

namespace tessera::gguf {
namespace {

class OutputFile {
 public:
  OutputFile(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (file_ == nullptr) fail("cannot write '{}': {}", path, std::strerror(errno));
  }
  ~OutputFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void bytes(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, file_) != n) fail("write to '{}' failed: {}", path_, std::strerror(errno));
    written_ += n;
  }
  template <typename T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[256] = {};
    while (written_ % alignment != 0) bytes(zeros, std::min<uint64_t>(alignment - written_ % alignment, 256));
  }
  void close() {
    const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok || !closed) fail("write to '{}' failed: {}", path_, std::strerror(errno));
  }

 private:
  std::string path_;
  std::FILE* file_;
  uint64_t written_ = 0;
};

// The value as an integer of width T; a value that does not fit would be silently truncated on disk.
template <typename T>
T narrow(const std::string& key, const Value& v) {
  if constexpr (std::is_signed_v<T>) {
    const int64_t i = v.as_int();
    if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max()) {
      fail("metadata key '{}': {} does not fit a {}", key, i, value_type_name(v.type));
    }
    return static_cast<T>(i);
  } else {
    const uint64_t u = v.as_uint();
    if (u > std::numeric_limits<T>::max()) {
      fail("metadata key '{}': {} does not fit a {}", key, u, value_type_name(v.type));
    }
    return static_cast<T>(u);
  }
}

void write_value(OutputFile& out, const std::string& key, const Value& v) {
  switch (v.type) {
    case ValueType::UInt8: out.pod<uint8_t>(narrow<uint8_t>(key, v)); break;
    case ValueType::Int8: out.pod<int8_t>(narrow<int8_t>(key, v)); break;
    case ValueType::UInt16: out.pod<uint16_t>(narrow<uint16_t>(key, v)); break;
    case ValueType::Int16: out.pod<int16_t>(narrow<int16_t>(key, v)); break;
    case ValueType::UInt32: out.pod<uint32_t>(narrow<uint32_t>(key, v)); break;
    case ValueType::Int32: out.pod<int32_t>(narrow<int32_t>(key, v)); break;
    case ValueType::UInt64: out.pod<uint64_t>(v.as_uint()); break;
    case ValueType::Int64: out.pod<int64_t>(v.as_int()); break;
    case ValueType::Float32: out.pod<float>(static_cast<float>(v.as_float())); break;
    case ValueType::Float64: out.pod<double>(v.as_float()); break;
    case ValueType::Bool: out.pod<uint8_t>(v.as_bool() ? 1 : 0); break;
    case ValueType::String: out.string(v.as_string()); break;
    case ValueType::Array: {
      const Array& a = v.as_array();
      out.pod<uint32_t>(static_cast<uint32_t>(a.element_type));
      out.pod<uint64_t>(a.elements.size());
      for (const Value& e : a.elements) {
        // The file stores one type for the whole array; a stray element would be misread by every reader.
        if (e.type != a.element_type) {
          fail("metadata key '{}': {} element in an array of {}", key, value_type_name(e.type),
               value_type_name(a.element_type));
        }
        write_value(out, key, e);
      }
      break;
    }
    default:
      fail("metadata key '{}': unknown value type {}", key, static_cast<uint32_t>(v.type));
  }
}

// The alignment the file will declare: an explicit general.alignment key wins over the constructor's value, since
// readers pad by the key.
uint64_t effective_alignment(const std::vector<std::pair<std::string, Value>>& metadata, uint64_t alignment) {
  for (const auto& [key, value] : metadata) {
    if (key != "general.alignment") continue;
    if (value.type != ValueType::UInt32) fail("general.alignment must be a u32, not a {}", value_type_name(value.type));
    alignment = value.as_uint();
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > UINT32_MAX) {
    fail("GGUF alignment {} is not a power of two that fits a u32", alignment);
  }
  return alignment;
}

}  // namespace

void Writer::set(const std::string& key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void Writer::set_string_array(const std::string& key, const std::vector<std::string>& values) {
  set(key, Value::make_string_array(values));
}

void Writer::set_f32_array(const std::string& key, const std::vector<float>& values) {
  set(key, Value::make_f32_array(values));
}

void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  set(key, Value::make_i32_array(values));
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                        TensorProducer produce) {
  if (dims.size() > 4) fail("tensor '{}': {} dimensions (GGUF allows at most 4)", name, dims.size());
  uint64_t n_elements = 1;
  for (uint64_t d : dims) {
    if (d == 0 || n_elements > (uint64_t{1} << 48) / d) fail("tensor '{}': dimension {} is zero or too large", name, d);
    n_elements *= d;
  }
  for (const auto& t : tensors_) {
    if (t.name == name) fail("duplicate tensor '{}'", name);
  }
  if (is_internal_tensor_type(type)) {
    fail("tensor '{}': {} is an in-memory type with no GGUF id; store its bytes as I8", name, tensor_type_name(type));
  }
  const auto& t = traits(type);
  const uint64_t row_length = dims.empty() ? 1 : dims[0];  // no dims: a scalar, as the reader reads it
  if (row_length % t.block_elements != 0) {
    fail("tensor '{}': row length {} is not a multiple of the {} block size {}", name, row_length, t.name,
         t.block_elements);
  }
  tensors_.push_back({name, type, std::move(dims), n_elements / t.block_elements * t.block_bytes,
                      std::move(produce)});
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> dims,
                        std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  add_tensor(name, type, std::move(dims), [shared, name](uint8_t* dst, uint64_t n_bytes) {
    if (n_bytes != shared->size()) fail("tensor '{}': {} bytes given, {} expected", name, shared->size(), n_bytes);
    std::memcpy(dst, shared->data(), n_bytes);
  });
}

void Writer::write(const std::string& path, const std::function<void(size_t, size_t)>& on_tensor) const {
  const uint64_t alignment = effective_alignment(metadata_, alignment_);
  const std::string tmp_path = path + ".tmp." + std::to_string(::getpid());
  try {
    OutputFile out(tmp_path);
    out.pod<uint32_t>(0x46554747);  // "GGUF"
    out.pod<uint32_t>(3);
    out.pod<uint64_t>(tensors_.size());
    const bool has_alignment_key = std::any_of(metadata_.begin(), metadata_.end(),
                                               [](const auto& kv) { return kv.first == "general.alignment"; });
    out.pod<uint64_t>(metadata_.size() + (has_alignment_key || alignment == 32 ? 0 : 1));
    for (const auto& [key, value] : metadata_) {
      out.string(key);
      out.pod<uint32_t>(static_cast<uint32_t>(value.type));
      write_value(out, key, value);
    }
    if (!has_alignment_key && alignment != 32) {
      out.string("general.alignment");
      out.pod<uint32_t>(static_cast<uint32_t>(ValueType::UInt32));
      out.pod<uint32_t>(static_cast<uint32_t>(alignment));
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      out.string(t.name);
      out.pod<uint32_t>(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) out.pod<uint64_t>(d);
      out.pod<uint32_t>(static_cast<uint32_t>(t.type));
      out.pod<uint64_t>(offset);
      offset += (t.n_bytes + alignment - 1) / alignment * alignment;
    }
    out.pad_to(alignment);
    std::vector<uint8_t> buffer;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      buffer.assign(t.n_bytes, 0);
      t.produce(buffer.data(), t.n_bytes);
      out.bytes(buffer.data(), buffer.size());
      out.pad_to(alignment);
      if (on_tensor) on_tensor(i + 1, tensors_.size());
    }
    out.close();
    if (std::rename(tmp_path.c_str(), path.c_str()) != 0) {
      fail("cannot rename '{}' to '{}': {}", tmp_path, path, std::strerror(errno));
    }
  } catch (...) {
    std::remove(tmp_path.c_str());
    throw;
  }
}

}  // namespace tessera::gguf
