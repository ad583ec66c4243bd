// GGUF v3 serialization (little-endian, as every GGUF consumer expects).
#include "formats/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

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

// Array::push_back already refused elements of another type or out of the element width's range.
void write_array(OutputFile& out, const Array& a) {
  out.pod<uint32_t>(static_cast<uint32_t>(a.element_type()));
  out.pod<uint64_t>(a.size());
  if (fixed_width(a.element_type()) > 0) {
    out.bytes(a.fixed_bytes().data(), a.fixed_bytes().size());
    return;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a.element_type() == ValueType::String) {
      const std::string_view s = a.string_at(i);
      out.pod<uint64_t>(s.size());
      out.bytes(s.data(), s.size());
    } else {
      write_array(out, a.array_at(i));
    }
  }
}

void write_value(OutputFile& out, const std::string& key, const Value& v) {
  if (v.type == ValueType::String) return out.string(v.as_string());
  if (v.type == ValueType::Array) return write_array(out, v.as_array());
  if (fixed_width(v.type) == 0) fail("metadata key '{}': unknown value type {}", key, static_cast<uint32_t>(v.type));
  // A one-element array checks the value against its width (a value that does not fit would be silently
  // truncated on disk) and gives its little-endian bytes.
  Array one(v.type);
  try {
    one.push_back(v);
  } catch (const Error& e) {
    fail("metadata key '{}': {}", key, e.what());
  }
  out.bytes(one.fixed_bytes().data(), one.fixed_bytes().size());
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
