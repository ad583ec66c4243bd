// GGUF (v2, v3) reader: metadata key/values and tensor table over a memory-mapped or in-memory file.
// No model knowledge lives here; src/model binds tensors by name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/tensor_type.h"

namespace tessera {

class MappedFile;

namespace gguf {

// On-disk metadata value type ids; do not renumber.
enum class ValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

std::string_view value_type_name(ValueType type);

struct Value;

// An array's elements stored by type, so that memory follows what the file spends on them: numbers and bools in
// their on-disk width (little-endian, as in the file), strings in one buffer with an end offset each, nested
// arrays as Arrays. A hostile count therefore costs no more memory than the bytes that back it (File::parse
// also caps the nested arrays, whose bookkeeping is larger than their 12 bytes on disk). Every element has the
// array's type: push_back refuses anything else, so a writer cannot produce an array readers would misread.
class Array {
 public:
  explicit Array(ValueType element_type = ValueType::UInt8) : element_type_(element_type) {}

  ValueType element_type() const { return element_type_; }
  size_t size() const;
  bool empty() const { return size() == 0; }
  // Element i as a Value (strings and arrays copied). Throws tessera::Error when i is out of range.
  Value at(size_t i) const;
  // Typed reads without a copy; throw tessera::Error for another element type or an index out of range.
  std::string_view string_at(size_t i) const;
  const Array& array_at(size_t i) const;

  // Appends `v`; throws tessera::Error when it is not of element_type() or its value does not fit the width.
  void push_back(const Value& v);
  void reserve(size_t n);
  // Fixed-width element types: `n` elements' raw little-endian bytes (bools must be 0 or 1, unchecked here).
  void append_fixed(const uint8_t* bytes, size_t n);
  void append_string(std::string_view s);
  void append_array(Array a);
  // The fixed-width elements' raw little-endian bytes (empty for strings and arrays).
  std::span<const uint8_t> fixed_bytes() const;

 private:
  ValueType element_type_;
  std::vector<uint8_t> bytes_;  // fixed-width elements, or the strings' bytes back to back
  std::vector<uint64_t> ends_;  // strings: where each one ends in bytes_
  std::vector<Array> arrays_;   // nested arrays
};

// Bytes one element of a fixed-width type takes on disk and in an Array; 0 for strings and arrays.
size_t fixed_width(ValueType type);

// One metadata value. Integers keep their declared width in `type` but are stored widened.
struct Value {
  ValueType type = ValueType::UInt8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value make_u32(uint32_t v) { return {ValueType::UInt32, uint64_t{v}}; }
  static Value make_u64(uint64_t v) { return {ValueType::UInt64, v}; }
  static Value make_i32(int32_t v) { return {ValueType::Int32, int64_t{v}}; }
  static Value make_f32(float v) { return {ValueType::Float32, double{v}}; }
  static Value make_bool(bool v) { return {ValueType::Bool, v}; }
  static Value make_string(std::string v) { return {ValueType::String, std::move(v)}; }
  // Throws tessera::Error when an element is not of `element_type` or does not fit its width.
  static Value make_array(ValueType element_type, const std::vector<Value>& elements);
  static Value make_string_array(const std::vector<std::string>& values);
  static Value make_f32_array(const std::vector<float>& values);
  static Value make_i32_array(const std::vector<int32_t>& values);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::Float32 || type == ValueType::Float64; }
  // Each accessor throws tessera::Error when the value is not of a fitting type.
  uint64_t as_uint() const;  // any non-negative integer
  int64_t as_int() const;    // any integer that fits int64
  double as_float() const;   // floats and integers
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;
};

// Metadata in file order.
using Metadata = std::vector<std::pair<std::string, Value>>;

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGUF order: dims[0] is the contiguous (row) dimension
  TensorType type = TensorType::F32;
  uint64_t offset = 0;         // relative to the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the file's bytes

  uint64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  uint64_t n_rows() const { return dims.empty() ? 1 : n_elements / dims[0]; }
};

class File {
 public:
  // Maps and parses a file. Throws tessera::Error with the path and what is wrong.
  static std::shared_ptr<File> open(const std::string& path);
  // Parses bytes owned by the caller (they must outlive the File), e.g. the embedded default model.
  static std::shared_ptr<File> from_memory(std::span<const uint8_t> bytes, std::string name);
  // Runs fn on a writable view of [p, p + n) and returns true, or returns false when those bytes cannot change.
  using Rewriter = std::function<bool(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn)>;

  // A file assembled in memory rather than parsed (a Hugging Face folder seen through GGUF names): each
  // tensor's `data`, `type` and `dims` are given and point into memory that `storage` keeps alive; n_elements
  // and n_bytes are computed here; `rewriter`, if any, serves rewrite_private. Throws tessera::Error for
  // duplicate keys or names and unknown types.
  static std::shared_ptr<File> from_parts(std::string name, Metadata metadata, std::vector<TensorInfo> tensors,
                                          std::shared_ptr<const void> storage, Rewriter rewriter = {});

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }  // the whole file as mapped (or as given)
  bool is_mapped() const { return mapping_ != nullptr; }     // opened from disk (not from_memory/from_parts)

  const Metadata& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  // Typed getters: throw tessera::Error naming the key when it is missing or has the wrong type.
  const Value& get(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::optional<uint64_t> find_uint(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Files opened from disk: runs fn on a writable view of the n bytes at p (inside the file's bytes), in this
  // process's private copy of the mapping (MappedFile::rewrite_private), and returns true. from_parts files
  // ask their rewriter; from_memory files are not this object's to change: returns false without running fn.
  bool rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn);
  // Files opened from disk: MappedFile::use_huge_pages for the n bytes at p (inside the file's bytes); a no-op
  // for other files.
  void use_huge_pages(const uint8_t* p, size_t n);
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  File() = default;
  void parse();

  std::string name_;
  std::shared_ptr<MappedFile> mapping_;  // empty for from_memory
  std::shared_ptr<const void> storage_;  // from_parts: whatever the tensors point into
  Rewriter rewriter_;                    // from_parts: how their bytes may change, if they may
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace gguf
}  // namespace tessera
