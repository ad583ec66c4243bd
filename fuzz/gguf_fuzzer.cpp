// libFuzzer target for the GGUF reader: any input must either parse into a self-consistent File whose every
// value and tensor byte can be read, or fail with one tessera::Error line. Anything else is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"

namespace {

using tessera::gguf::Array;
using tessera::gguf::File;
using tessera::gguf::TensorInfo;
using tessera::gguf::Value;
using tessera::gguf::ValueType;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "gguf_fuzzer: invariant violated: %s\n", what);
    std::abort();
  }
}

// Reads the whole value through the public accessors; returns a checksum so nothing is optimized away.
uint64_t touch(const Value& v, int depth) {
  require(depth <= 16, "array nesting deeper than the reader allows");
  switch (v.type) {
    case ValueType::UInt8:
    case ValueType::UInt16:
    case ValueType::UInt32:
    case ValueType::UInt64:
      require(v.is_integer(), "unsigned value is not an integer");
      require(v.as_float() == static_cast<double>(v.as_uint()), "as_float disagrees with as_uint");
      return v.as_uint();
    case ValueType::Int8:
    case ValueType::Int16:
    case ValueType::Int32:
    case ValueType::Int64:
      require(v.is_integer(), "signed value is not an integer");
      return static_cast<uint64_t>(v.as_int());
    case ValueType::Float32:
    case ValueType::Float64: {
      require(v.is_float(), "float value is not a float");
      const double d = v.as_float();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      return bits;
    }
    case ValueType::Bool:
      return v.as_bool() ? 1 : 0;
    case ValueType::String: {
      uint64_t sum = 0;
      for (char c : v.as_string()) sum += static_cast<unsigned char>(c);
      return sum;
    }
    case ValueType::Array: {
      const Array& a = v.as_array();
      uint64_t sum = a.size();
      for (size_t i = 0; i < a.size(); ++i) {
        const Value e = a.at(i);
        require(e.type == a.element_type(), "array element of another type than the array's");
        sum += touch(e, depth + 1);
      }
      return sum;
    }
  }
  require(false, "value of an unknown type was accepted");
  return 0;
}

uint64_t touch(const File& file, std::span<const uint8_t> bytes) {
  uint64_t sum = file.version() + file.alignment();
  require(file.version() == 2 || file.version() == 3, "unsupported version accepted");
  require(file.alignment() != 0 && (file.alignment() & (file.alignment() - 1)) == 0, "bad alignment accepted");
  require(file.file_size() == bytes.size(), "file size differs from the input");
  for (const auto& [key, value] : file.metadata()) {
    require(file.find(key) == &value, "duplicate or unfindable metadata key");
    sum += touch(value, 0);
  }
  for (const TensorInfo& t : file.tensors()) {
    require(file.find_tensor(t.name) == &t, "duplicate or unfindable tensor");
    require(t.dims.size() <= 4, "more than 4 dims accepted");
    uint64_t n_elements = 1;
    for (uint64_t d : t.dims) n_elements *= d;
    require(n_elements == t.n_elements, "n_elements differs from the product of dims");
    const auto& traits = tessera::traits(t.type);
    require(t.row_length() % traits.block_elements == 0, "row not a whole number of blocks");
    require(t.n_bytes == t.n_elements / traits.block_elements * traits.block_bytes, "wrong n_bytes");
    require(t.offset % file.alignment() == 0, "misaligned tensor offset accepted");
    require(t.data == bytes.data() + file.data_offset() + t.offset, "data pointer differs from the offset");
    require(t.data >= bytes.data() && t.n_bytes <= static_cast<uint64_t>(bytes.data() + bytes.size() - t.data),
            "tensor data outside the input");
    for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];  // ASan flags any byte past the input
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const auto file = File::from_memory(bytes, "fuzz.gguf");
    volatile uint64_t sink = touch(*file, bytes);
    (void)sink;
  } catch (const tessera::Error& e) {
    const std::string message = e.what();
    require(message.rfind("fuzz.gguf: ", 0) == 0, "error message does not start with the file name");
    require(message.find('\n') == std::string::npos, "error message spans several lines");
    require(message.size() < 512, "error message is unreasonably long");
  }
  return 0;
}
