// GGUF parser. Every count, length and offset read from the file is checked against the bytes that remain
// before anything is allocated, so a corrupt or hostile file yields an error, never a crash or a huge allocation.
#include "formats/gguf.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_set>

#include "core/check.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/printable.h"

namespace tessera::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;

// Bounds-checked little-endian cursor over the file's bytes. It also keeps the metadata's memory in check:
// arrays store what the file spends on them, except nested arrays, whose bookkeeping (sizeof(Array)) is larger
// than their 12 bytes on disk; those are charged here, against the file's size plus a little slack.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& name)
      : bytes_(bytes), name_(name), memory_left_(bytes.size() + kMemorySlack) {}

  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t length = read<uint64_t>(what);
    need(length, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return s;
  }

  // Accounts for `n` bytes of memory the metadata is about to take.
  void charge(uint64_t n, const std::string& key) {
    if (n > memory_left_) {
      fail("{}: metadata key '{}': arrays of arrays would take more than {} bytes of memory (the file's size "
           "and {} bytes)", name_, printable(key), bytes_.size() + kMemorySlack, kMemorySlack);
    }
    memory_left_ -= n;
  }

  const uint8_t* here() const { return bytes_.data() + pos_; }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail("{}: truncated GGUF file: {} needs {} bytes at offset {} but only {} remain", name_, what, n, pos_,
           remaining());
    }
  }

 private:
  static constexpr uint64_t kMemorySlack = 1 << 20;

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
  uint64_t memory_left_;
};

// Smallest on-disk size of one value of a type: used to reject element counts the file cannot hold.
uint64_t min_value_bytes(ValueType type) {
  switch (type) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool:
      return 1;
    case ValueType::UInt16:
    case ValueType::Int16:
      return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32:
      return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64:
    case ValueType::String:  // the u64 length
      return 8;
    case ValueType::Array:  // element type + count
      return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::Float64); }

// Reads an array's header and elements into compact storage: fixed-width elements are copied in one piece.
Array read_array(Reader& r, const std::string& key, const std::string& name, int depth) {
  if (depth >= kMaxArrayNesting) fail("{}: metadata key '{}': arrays nested too deeply", name, printable(key));
  const uint32_t element_type = r.read<uint32_t>("array element type");
  if (!valid_value_type(element_type)) {
    fail("{}: metadata key '{}': unknown array element type {}", name, printable(key), element_type);
  }
  const uint64_t count = r.read<uint64_t>("array length");
  const auto et = static_cast<ValueType>(element_type);
  if (count > r.remaining() / min_value_bytes(et)) {
    fail("{}: metadata key '{}': array of {} elements does not fit in the {} bytes left", name, printable(key),
         count, r.remaining());
  }
  Array array(et);
  if (const size_t width = fixed_width(et)) {
    const uint8_t* p = r.here();
    r.skip(count * width, "array elements");
    if (et == ValueType::Bool) {
      for (uint64_t i = 0; i < count; ++i)
        if (p[i] > 1) fail("{}: metadata key '{}': invalid bool byte {}", name, printable(key), p[i]);
    }
    array.append_fixed(p, count);
    return array;
  }
  if (et == ValueType::Array) r.charge(count * sizeof(Array), key);
  array.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (et == ValueType::String) {
      const uint64_t length = r.read<uint64_t>("string value");
      r.need(length, "string value");
      array.append_string(std::string_view(reinterpret_cast<const char*>(r.here()), length));
      r.skip(length, "string value");
    } else {
      array.append_array(read_array(r, key, name, depth + 1));
    }
  }
  return array;
}

Value read_value(Reader& r, ValueType type, const std::string& key, const std::string& name, int depth) {
  switch (type) {
    case ValueType::UInt8:
      return {type, uint64_t{r.read<uint8_t>("u8 value")}};
    case ValueType::Int8:
      return {type, int64_t{r.read<int8_t>("i8 value")}};
    case ValueType::UInt16:
      return {type, uint64_t{r.read<uint16_t>("u16 value")}};
    case ValueType::Int16:
      return {type, int64_t{r.read<int16_t>("i16 value")}};
    case ValueType::UInt32:
      return {type, uint64_t{r.read<uint32_t>("u32 value")}};
    case ValueType::Int32:
      return {type, int64_t{r.read<int32_t>("i32 value")}};
    case ValueType::UInt64:
      return {type, r.read<uint64_t>("u64 value")};
    case ValueType::Int64:
      return {type, r.read<int64_t>("i64 value")};
    case ValueType::Float32:
      return {type, double{r.read<float>("f32 value")}};
    case ValueType::Float64:
      return {type, r.read<double>("f64 value")};
    case ValueType::Bool: {
      const uint8_t b = r.read<uint8_t>("bool value");
      if (b > 1) fail("{}: metadata key '{}': invalid bool byte {}", name, printable(key), b);
      return {type, b != 0};
    }
    case ValueType::String:
      return {type, r.read_string("string value")};
    case ValueType::Array:
      return {type, read_array(r, key, name, depth)};
  }
  fail("{}: metadata key '{}': unknown value type {}", name, printable(key), static_cast<uint32_t>(type));
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::UInt8: return "u8";
    case ValueType::Int8: return "i8";
    case ValueType::UInt16: return "u16";
    case ValueType::Int16: return "i16";
    case ValueType::UInt32: return "u32";
    case ValueType::Int32: return "i32";
    case ValueType::Float32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::UInt64: return "u64";
    case ValueType::Int64: return "i64";
    case ValueType::Float64: return "f64";
  }
  return "?";
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}

uint64_t Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data)) {
    if (*i >= 0) return static_cast<uint64_t>(*i);
    fail("expected a non-negative integer, got {}", *i);
  }
  fail("expected an integer, got a {}", value_type_name(type));
}

int64_t Value::as_int() const {
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(*u);
    fail("integer {} does not fit int64", *u);
  }
  fail("expected an integer, got a {}", value_type_name(type));
}

double Value::as_float() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  fail("expected a number, got a {}", value_type_name(type));
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  fail("expected a bool, got a {}", value_type_name(type));
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&data)) return *s;
  fail("expected a string, got a {}", value_type_name(type));
}

const Array& Value::as_array() const {
  if (const auto* a = std::get_if<Array>(&data)) return *a;
  fail("expected an array, got a {}", value_type_name(type));
}

size_t fixed_width(ValueType type) {
  switch (type) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool: return 1;
    case ValueType::UInt16:
    case ValueType::Int16: return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32: return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64: return 8;
    case ValueType::String:
    case ValueType::Array: return 0;
  }
  return 0;
}

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A fixed-width value of `type` from its raw bytes, widened as Value stores it.
Value decode_fixed(ValueType type, const uint8_t* p) {
  switch (type) {
    case ValueType::UInt8: return {type, uint64_t{load<uint8_t>(p)}};
    case ValueType::Int8: return {type, int64_t{load<int8_t>(p)}};
    case ValueType::UInt16: return {type, uint64_t{load<uint16_t>(p)}};
    case ValueType::Int16: return {type, int64_t{load<int16_t>(p)}};
    case ValueType::UInt32: return {type, uint64_t{load<uint32_t>(p)}};
    case ValueType::Int32: return {type, int64_t{load<int32_t>(p)}};
    case ValueType::UInt64: return {type, load<uint64_t>(p)};
    case ValueType::Int64: return {type, load<int64_t>(p)};
    case ValueType::Float32: return {type, double{load<float>(p)}};
    case ValueType::Float64: return {type, load<double>(p)};
    case ValueType::Bool: return {type, *p != 0};
    case ValueType::String:
    case ValueType::Array: break;
  }
  fail("a {} is not a fixed-width value", value_type_name(type));
}

// The integer `v` in the width of T; a value that does not fit would be truncated.
template <typename T>
T narrow_to(const Value& v) {
  if constexpr (std::is_signed_v<T>) {
    const int64_t i = v.as_int();
    if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
      fail("{} does not fit a {}", i, value_type_name(v.type));
    return static_cast<T>(i);
  } else {
    const uint64_t u = v.as_uint();
    if (u > std::numeric_limits<T>::max()) fail("{} does not fit a {}", u, value_type_name(v.type));
    return static_cast<T>(u);
  }
}

template <typename T>
void append_pod(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

size_t Array::size() const {
  if (const size_t width = fixed_width(element_type_)) return bytes_.size() / width;
  return element_type_ == ValueType::String ? ends_.size() : arrays_.size();
}

Value Array::at(size_t i) const {
  if (i >= size()) fail("array index {} is out of range ({} elements)", i, size());
  if (const size_t width = fixed_width(element_type_)) return decode_fixed(element_type_, bytes_.data() + i * width);
  if (element_type_ == ValueType::String) return Value::make_string(std::string(string_at(i)));
  return {ValueType::Array, arrays_[i]};
}

std::string_view Array::string_at(size_t i) const {
  if (element_type_ != ValueType::String) fail("expected a string, got a {}", value_type_name(element_type_));
  if (i >= ends_.size()) fail("array index {} is out of range ({} elements)", i, ends_.size());
  const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  return std::string_view(reinterpret_cast<const char*>(bytes_.data()) + begin, ends_[i] - begin);
}

const Array& Array::array_at(size_t i) const {
  if (element_type_ != ValueType::Array) fail("expected an array, got a {}", value_type_name(element_type_));
  if (i >= arrays_.size()) fail("array index {} is out of range ({} elements)", i, arrays_.size());
  return arrays_[i];
}

void Array::reserve(size_t n) {
  if (const size_t width = fixed_width(element_type_)) bytes_.reserve(n * width);
  else if (element_type_ == ValueType::String) ends_.reserve(n);
  else arrays_.reserve(n);
}

void Array::push_back(const Value& v) {
  if (v.type != element_type_)
    fail("{} element in an array of {}", value_type_name(v.type), value_type_name(element_type_));
  switch (element_type_) {
    case ValueType::UInt8: return append_pod(bytes_, narrow_to<uint8_t>(v));
    case ValueType::Int8: return append_pod(bytes_, narrow_to<int8_t>(v));
    case ValueType::UInt16: return append_pod(bytes_, narrow_to<uint16_t>(v));
    case ValueType::Int16: return append_pod(bytes_, narrow_to<int16_t>(v));
    case ValueType::UInt32: return append_pod(bytes_, narrow_to<uint32_t>(v));
    case ValueType::Int32: return append_pod(bytes_, narrow_to<int32_t>(v));
    case ValueType::UInt64: return append_pod(bytes_, v.as_uint());
    case ValueType::Int64: return append_pod(bytes_, v.as_int());
    case ValueType::Float32: return append_pod(bytes_, static_cast<float>(v.as_float()));
    case ValueType::Float64: return append_pod(bytes_, v.as_float());
    case ValueType::Bool: return append_pod(bytes_, uint8_t{v.as_bool()});
    case ValueType::String: return append_string(v.as_string());
    case ValueType::Array: return append_array(v.as_array());
  }
}

void Array::append_fixed(const uint8_t* bytes, size_t n) {
  const size_t width = fixed_width(element_type_);
  TESSERA_CHECK(width > 0);
  bytes_.insert(bytes_.end(), bytes, bytes + n * width);
}

void Array::append_string(std::string_view s) {
  TESSERA_CHECK(element_type_ == ValueType::String);
  bytes_.insert(bytes_.end(), s.begin(), s.end());
  ends_.push_back(bytes_.size());
}

void Array::append_array(Array a) {
  TESSERA_CHECK(element_type_ == ValueType::Array);
  arrays_.push_back(std::move(a));
}

std::span<const uint8_t> Array::fixed_bytes() const {
  if (fixed_width(element_type_) == 0) return {};
  return bytes_;
}

Value Value::make_array(ValueType element_type, const std::vector<Value>& elements) {
  Array array(element_type);
  array.reserve(elements.size());
  for (const Value& e : elements) array.push_back(e);
  return {ValueType::Array, std::move(array)};
}

Value Value::make_string_array(const std::vector<std::string>& values) {
  Array array(ValueType::String);
  array.reserve(values.size());
  for (const std::string& v : values) array.append_string(v);
  return {ValueType::Array, std::move(array)};
}

Value Value::make_f32_array(const std::vector<float>& values) {
  Array array(ValueType::Float32);
  array.append_fixed(reinterpret_cast<const uint8_t*>(values.data()), values.size());
  return {ValueType::Array, std::move(array)};
}

Value Value::make_i32_array(const std::vector<int32_t>& values) {
  Array array(ValueType::Int32);
  array.append_fixed(reinterpret_cast<const uint8_t*>(values.data()), values.size());
  return {ValueType::Array, std::move(array)};
}

std::shared_ptr<File> File::open(const std::string& path) {
  auto mapping = std::make_shared<MappedFile>(path);
  std::shared_ptr<File> file(new File());
  file->name_ = path;
  file->mapping_ = mapping;
  file->bytes_ = mapping->bytes();
  file->parse();
  return file;
}

bool File::rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn) {
  if (mapping_ == nullptr) return rewriter_ ? rewriter_(p, n, fn) : false;
  TESSERA_CHECK(p >= bytes_.data() && n <= bytes_.size() && size_t(p - bytes_.data()) <= bytes_.size() - n);
  mapping_->rewrite_private(size_t(p - bytes_.data()), n, fn);
  return true;
}

void File::use_huge_pages(const uint8_t* p, size_t n) {
  if (mapping_ == nullptr) return;
  TESSERA_CHECK(p >= bytes_.data() && n <= bytes_.size() && size_t(p - bytes_.data()) <= bytes_.size() - n);
  mapping_->use_huge_pages(size_t(p - bytes_.data()), n);
}

std::shared_ptr<File> File::from_memory(std::span<const uint8_t> bytes, std::string name) {
  std::shared_ptr<File> file(new File());
  file->name_ = std::move(name);
  file->bytes_ = bytes;
  file->parse();
  return file;
}

std::shared_ptr<File> File::from_parts(std::string name, Metadata metadata, std::vector<TensorInfo> tensors,
                                       std::shared_ptr<const void> storage, Rewriter rewriter) {
  std::shared_ptr<File> file(new File());
  file->name_ = std::move(name);
  file->storage_ = std::move(storage);
  file->rewriter_ = std::move(rewriter);
  file->version_ = 3;  // what it would be written as
  std::unordered_set<std::string> seen;
  for (const auto& [key, value] : metadata) {
    if (!seen.insert(key).second) fail("{}: duplicate metadata key '{}'", file->name_, printable(key));
  }
  seen.clear();
  for (TensorInfo& t : tensors) {
    if (!seen.insert(t.name).second) fail("{}: duplicate tensor '{}'", file->name_, printable(t.name));
    if (t.data == nullptr || t.dims.size() > kMaxDims) fail("{}: tensor '{}' is malformed", file->name_, printable(t.name));
    t.n_elements = 1;
    for (uint64_t d : t.dims) t.n_elements *= d;
    const TensorTypeTraits& tt = traits(t.type);
    if (t.row_length() % tt.block_elements != 0) {
      fail("{}: tensor '{}': row length {} is not a multiple of the {} block size", file->name_, printable(t.name),
           t.row_length(), tt.name);
    }
    t.n_bytes = t.n_elements / tt.block_elements * tt.block_bytes;
    t.offset = 0;
  }
  file->metadata_ = std::move(metadata);
  file->tensors_ = std::move(tensors);
  return file;
}

void File::parse() {
  Reader r(bytes_, name_);
  if (bytes_.size() < 4) fail("{}: not a GGUF file: only {} bytes", name_, bytes_.size());
  const uint32_t magic = r.read<uint32_t>("magic");
  if (magic != kMagic) fail("{}: not a GGUF file (bad magic 0x{:08x})", name_, magic);
  version_ = r.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3) fail("{}: big-endian GGUF v{} files are not supported", name_, swapped);
    fail("{}: unsupported GGUF version {} (supported: 2, 3)", name_, version_);
  }
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  // Each key/value needs at least a key length (8) and a type (4); each tensor info at least 8+4+4+8.
  if (n_kv > r.remaining() / 12) fail("{}: metadata count {} is larger than the file can hold", name_, n_kv);

  std::unordered_set<std::string> seen_keys;
  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string("metadata key");
    const uint32_t type = r.read<uint32_t>("metadata value type");
    if (!valid_value_type(type)) fail("{}: metadata key '{}': unknown value type {}", name_, printable(key), type);
    Value value = read_value(r, static_cast<ValueType>(type), key, name_, 0);
    if (!seen_keys.insert(key).second) fail("{}: duplicate metadata key '{}'", name_, printable(key));
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::UInt32) {
      fail("{}: general.alignment must be a u32, not a {}", name_, value_type_name(a->type));
    }
    alignment_ = a->as_uint();
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0) {
      fail("{}: general.alignment {} is not a power of two", name_, alignment_);
    }
  }

  if (n_tensors > r.remaining() / 24) fail("{}: tensor count {} is larger than the file can hold", name_, n_tensors);
  std::unordered_set<std::string> seen_tensors;
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.name = r.read_string("tensor name");
    const uint32_t n_dims = r.read<uint32_t>("tensor dimension count");
    if (n_dims > kMaxDims) {
      fail("{}: tensor '{}' has {} dimensions (at most {})", name_, printable(t.name), n_dims, kMaxDims);
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = r.read<uint64_t>("tensor dimension");
      if (dim == 0 || dim > (uint64_t{1} << 40) || t.n_elements > (uint64_t{1} << 48) / dim) {
        fail("{}: tensor '{}' has an absurd dimension {}", name_, printable(t.name), dim);
      }
      t.n_elements *= dim;
      t.dims.push_back(dim);
    }
    const uint32_t type_id = r.read<uint32_t>("tensor type");
    const auto type_traits = tensor_type_traits(type_id);
    if (!type_traits) fail("{}: tensor '{}' has unknown or unsupported type id {}", name_, printable(t.name), type_id);
    t.type = type_traits->type;
    if (t.row_length() % type_traits->block_elements != 0) {
      fail("{}: tensor '{}': row length {} is not a multiple of the {} block size {}", name_, printable(t.name),
           t.row_length(), type_traits->name, type_traits->block_elements);
    }
    t.n_bytes = t.n_elements / type_traits->block_elements * type_traits->block_bytes;
    t.offset = r.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0) {
      fail("{}: tensor '{}' offset {} is not aligned to {}", name_, printable(t.name), t.offset, alignment_);
    }
    if (!seen_tensors.insert(t.name).second) fail("{}: duplicate tensor '{}'", name_, printable(t.name));
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (r.position() + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t file_size = bytes_.size();
  if (data_offset_ > file_size && !tensors_.empty()) {
    fail("{}: truncated GGUF file: tensor data would start at {} past the end ({} bytes)", name_, data_offset_,
         file_size);
  }
  for (TensorInfo& t : tensors_) {
    const uint64_t available = file_size > data_offset_ ? file_size - data_offset_ : 0;
    if (t.offset > available || t.n_bytes > available - t.offset) {
      // Not offset + n_bytes: a hostile offset near 2^64 would wrap in the message.
      fail("{}: tensor '{}' data ({} bytes at data offset {}) runs past the end of the file ({} data bytes)", name_,
           printable(t.name), t.n_bytes, t.offset, available);
    }
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
}

const Value* File::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Value& File::get(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) fail("{}: missing required metadata key '{}'", name_, key);
  return *v;
}

// The get_* forms: get() reports a missing key, the find_* forms report a wrongly typed one.
std::string File::get_string(std::string_view key) const {
  get(key);
  return *find_string(key);
}

uint64_t File::get_uint(std::string_view key) const {
  get(key);
  return *find_uint(key);
}

double File::get_float(std::string_view key) const {
  get(key);
  return *find_float(key);
}

std::optional<uint64_t> File::find_uint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  try {
    return v->as_uint();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", name_, printable(key), e.what());
  }
}

std::optional<double> File::find_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  try {
    return v->as_float();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", name_, printable(key), e.what());
  }
}

std::optional<std::string> File::find_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  try {
    return v->as_string();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", name_, printable(key), e.what());
  }
}

std::optional<bool> File::find_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  try {
    return v->as_bool();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", name_, printable(key), e.what());
  }
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace tessera::gguf
