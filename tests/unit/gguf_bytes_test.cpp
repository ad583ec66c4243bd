// GGUF files built byte by byte: the v2 layout, and every kind of corrupt or hostile input, which must end in one
// clear tessera::Error line, never a crash, a hang or a huge allocation.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace tessera::gguf {
namespace {

// Little-endian byte builder for hand-made GGUF files.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return pod(v); }
  Bytes& u32(uint32_t v) { return pod(v); }
  Bytes& u64(uint64_t v) { return pod(v); }
  Bytes& i32(int32_t v) { return pod(v); }
  Bytes& f32(float v) { return pod(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
    return *this;
  }
  Bytes& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  Bytes& fill(size_t n, uint8_t v) {
    bytes_.insert(bytes_.end(), n, v);
    return *this;
  }
  Bytes& pad_to(size_t alignment) { return fill((alignment - bytes_.size() % alignment) % alignment, 0); }

  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& key(const std::string& k, ValueType type) { return str(k).u32(static_cast<uint32_t>(type)); }
  Bytes& kv_u32(const std::string& k, uint32_t v) { return key(k, ValueType::UInt32).u32(v); }
  Bytes& kv_string(const std::string& k, const std::string& v) { return key(k, ValueType::String).str(v); }
  Bytes& array_header(ValueType element_type, uint64_t count) {
    return u32(static_cast<uint32_t>(element_type)).u64(count);
  }
  Bytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  template <typename T>
  Bytes& pod(T v) {
    return raw(&v, sizeof v);
  }
  std::vector<uint8_t> bytes_;
};

std::shared_ptr<File> parse(const std::vector<uint8_t>& bytes) { return File::from_memory(bytes, "test.gguf"); }

// The file must be rejected with one line that starts with the file name and contains `what`.
void expect_error(const std::vector<uint8_t>& bytes, const std::string& what) {
  try {
    parse(bytes);
    ADD_FAILURE() << "parsed without error; expected: " << what;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(what), std::string::npos) << message;
    EXPECT_EQ(message.rfind("test.gguf: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_LT(message.size(), 300u) << message;
  }
}

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ8_0 = 8;

// A small valid file holding every value type, nested arrays and two tensors.
Bytes small_valid_file(uint32_t version) {
  Bytes b;
  b.header(version, 2, 8);
  b.kv_string("general.architecture", "llama");
  b.kv_u32("general.alignment", 32);
  b.key("u8", ValueType::UInt8).u8(200);
  b.key("f32", ValueType::Float32).f32(0.5f);
  b.key("flag", ValueType::Bool).u8(1);
  b.key("tokens", ValueType::Array).array_header(ValueType::String, 3).str("<s>").str("").str("abc");
  b.key("ids", ValueType::Array).array_header(ValueType::Int32, 2).i32(-1).i32(7);
  b.key("nested", ValueType::Array)
      .array_header(ValueType::Array, 2)
      .array_header(ValueType::UInt64, 1)
      .u64(99)
      .array_header(ValueType::Bool, 0);
  b.tensor("a", {4}, kF32, 0);
  b.tensor("b", {32, 2}, kQ8_0, 32);
  b.pad_to(32);
  for (int i = 0; i < 4; ++i) b.f32(static_cast<float>(i));
  b.pad_to(32);
  b.fill(68, 0x11);
  return b;
}

void check_small_valid_file(const File& file) {
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_uint("u8"), 200u);
  EXPECT_EQ(file.get_float("f32"), 0.5);
  EXPECT_EQ(file.find_bool("flag"), true);
  const Array& tokens = file.get("tokens").as_array();
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens.string_at(1), "");
  EXPECT_EQ(tokens.string_at(2), "abc");
  EXPECT_EQ(tokens.at(0).as_string(), "<s>");
  EXPECT_EQ(file.get("ids").as_array().at(0).as_int(), -1);
  EXPECT_EQ(file.get("ids").as_array().at(1).as_int(), 7);
  const Array& nested = file.get("nested").as_array();
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested.array_at(0).at(0).as_uint(), 99u);
  EXPECT_EQ(nested.array_at(1).element_type(), ValueType::Bool);
  EXPECT_THROW(nested.array_at(2), Error);
  EXPECT_THROW(tokens.array_at(0), Error);
  ASSERT_EQ(file.tensors().size(), 2u);
  const TensorInfo& a = file.tensors()[0];
  EXPECT_EQ(a.n_bytes, 16u);
  float third;
  std::memcpy(&third, a.data + 8, 4);
  EXPECT_EQ(third, 2.0f);
  const TensorInfo& b = file.tensors()[1];
  EXPECT_EQ(b.type, TensorType::Q8_0);
  EXPECT_EQ(b.n_bytes, 68u);
  EXPECT_EQ(b.data[67], 0x11);
  EXPECT_EQ(file.data_offset() + b.offset + b.n_bytes, file.file_size());
}

TEST(GgufBytes, Version2Parses) {
  const Bytes b = small_valid_file(2);
  const auto file = parse(b.bytes());
  EXPECT_EQ(file->version(), 2u);
  check_small_valid_file(*file);
}

TEST(GgufBytes, Version3Parses) {
  const Bytes b = small_valid_file(3);  // from_memory does not copy: keep the bytes alive
  const auto file = parse(b.bytes());
  EXPECT_EQ(file->version(), 3u);
  check_small_valid_file(*file);
}

// The hand-built layout and the writer's agree byte for byte, so the builder tests the real format.
TEST(GgufBytes, BuilderMatchesWriterOutput) {
  Bytes b;
  b.header(3, 1, 2).kv_string("name", "x").kv_u32("n", 5).tensor("t", {2, 2}, kF32, 0).pad_to(32);
  for (int i = 0; i < 4; ++i) b.f32(static_cast<float>(i));
  b.pad_to(32);

  Writer w;
  w.set_string("name", "x");
  w.set_u32("n", 5);
  std::vector<uint8_t> data(16);
  for (int i = 0; i < 4; ++i) {
    const float f = static_cast<float>(i);
    std::memcpy(data.data() + 4 * i, &f, 4);
  }
  w.add_tensor("t", TensorType::F32, {2, 2}, data);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera_gguf_builder_" + std::to_string(::getpid()))).string();
  w.write(path);
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  EXPECT_EQ(written, b.bytes());
}

TEST(GgufBytes, NoTensorsAndNoPaddingIsValid) {
  Bytes b;
  b.header(3, 0, 1).kv_string("k", "v");  // ends off the alignment; nothing follows
  const auto file = parse(b.bytes());
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->get_string("k"), "v");
}

TEST(GgufBytes, TooShortAndWrongMagic) {
  for (size_t n = 0; n < 4; ++n) expect_error(std::vector<uint8_t>(n, 'G'), "not a GGUF file: only");
  expect_error({'G', 'G', 'M', 'L', 3, 0, 0, 0}, "not a GGUF file (bad magic 0x4c4d4747)");
  std::vector<uint8_t> just_magic = {'G', 'G', 'U', 'F'};
  expect_error(just_magic, "truncated GGUF file: version needs 4 bytes at offset 4 but only 0 remain");
}

TEST(GgufBytes, UnsupportedVersions) {
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    Bytes b;
    b.header(version, 0, 0);
    expect_error(b.bytes(), "unsupported GGUF version " + std::to_string(version) + " (supported: 2, 3)");
  }
  Bytes big_endian;
  big_endian.header(0x03000000, 0, 0);
  expect_error(big_endian.bytes(), "big-endian GGUF v3 files are not supported");
}

// Every proper prefix of a valid file is an error, never a crash; each copy is its own heap block so that an
// over-read shows under AddressSanitizer.
TEST(GgufBytes, TruncatedAtEveryOffset) {
  for (uint32_t version : {2u, 3u}) {
    const std::vector<uint8_t> full = small_valid_file(version).bytes();
    for (size_t n = 0; n < full.size(); ++n) {
      SCOPED_TRACE(n);
      const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      expect_error(prefix, n < 4 ? "not a GGUF file" : "");
    }
    EXPECT_NO_THROW(parse(full));
  }
}

// Every single-byte corruption of a valid file either parses into tensors that lie inside the bytes or fails
// with one error line.
TEST(GgufBytes, CorruptedAtEveryOffset) {
  const std::vector<uint8_t> full = small_valid_file(3).bytes();
  for (size_t n = 0; n < full.size(); ++n) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, static_cast<uint8_t>(full[n] ^ 1)}) {
      SCOPED_TRACE(::testing::Message() << "offset " << n << " value " << int{v});
      std::vector<uint8_t> bytes = full;
      bytes[n] = v;
      try {
        const auto file = parse(bytes);
        for (const TensorInfo& t : file->tensors()) {
          EXPECT_GE(t.data, bytes.data());
          EXPECT_LE(t.data + t.n_bytes, bytes.data() + bytes.size());
        }
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      }
    }
  }
}

TEST(GgufBytes, TensorDataPastEndOfFile) {
  Bytes b;
  b.header(3, 1, 0).tensor("w", {8}, kF32, 0).pad_to(32).fill(31, 0);  // needs 32 bytes
  expect_error(b.bytes(), "tensor 'w' data (32 bytes at data offset 0) runs past the end of the file (31 data bytes)");

  Bytes offset;
  offset.header(3, 1, 0).tensor("w", {1}, kF32, 64).pad_to(32).fill(64, 0);
  expect_error(offset.bytes(), "tensor 'w' data (4 bytes at data offset 64) runs past the end");

  Bytes no_data;  // the data section would start past the end of the file
  no_data.header(3, 1, 0).tensor("w", {1}, kF32, 0);
  expect_error(no_data.bytes(), "tensor data would start at 64 past the end (57 bytes)");
}

// Regression: the message printed offset + n_bytes, which wrapped around for offsets near 2^64.
TEST(GgufBytes, HugeTensorOffsetIsReportedWithoutWrapping) {
  Bytes b;
  b.header(3, 1, 0).tensor("w", {64}, kF32, ~uint64_t{31}).pad_to(32).fill(256, 0);
  expect_error(b.bytes(), "(256 bytes at data offset 18446744073709551584) runs past the end");
}

TEST(GgufBytes, AbsurdCounts) {
  Bytes tensors;
  tensors.header(3, uint64_t{1} << 60, 0);
  expect_error(tensors.bytes(), "tensor count 1152921504606846976 is larger than the file can hold");

  Bytes kvs;
  kvs.header(3, 0, uint64_t{1} << 60);
  expect_error(kvs.bytes(), "metadata count 1152921504606846976 is larger than the file can hold");

  Bytes array;
  array.header(3, 0, 1).key("a", ValueType::Array).array_header(ValueType::UInt8, uint64_t{1} << 62);
  expect_error(array.bytes(), "metadata key 'a': array of 4611686018427387904 elements does not fit in the 0 bytes");

  Bytes nested_array;  // the inner count is checked against what is left, too
  nested_array.header(3, 0, 1)
      .key("n", ValueType::Array)
      .array_header(ValueType::Array, 1)
      .array_header(ValueType::String, uint64_t{1} << 61)
      .fill(64, 0);
  expect_error(nested_array.bytes(), "array of 2305843009213693952 elements does not fit in the 64 bytes left");

  Bytes key;
  key.header(3, 0, 1).u64(uint64_t{1} << 63).fill(16, 'k');
  expect_error(key.bytes(), "metadata key needs 9223372036854775808 bytes at offset 32 but only 16 remain");

  Bytes value;
  value.header(3, 0, 1).key("s", ValueType::String).u64(uint64_t{1} << 63);
  expect_error(value.bytes(), "string value needs 9223372036854775808 bytes");

  Bytes name;
  name.header(3, 1, 0).u64(~uint64_t{0}).fill(64, 0);
  expect_error(name.bytes(), "tensor name needs 18446744073709551615 bytes");
}

TEST(GgufBytes, AbsurdAndTooManyDims) {
  const auto with_dims = [](const std::vector<uint64_t>& dims) {
    Bytes b;
    b.header(3, 1, 0).tensor("w", dims, kF32, 0).pad_to(32).fill(64, 0);
    return b.bytes();
  };
  expect_error(with_dims({0}), "tensor 'w' has an absurd dimension 0");
  expect_error(with_dims({uint64_t{1} << 41}), "tensor 'w' has an absurd dimension 2199023255552");
  expect_error(with_dims({uint64_t{1} << 30, uint64_t{1} << 30}), "has an absurd dimension 1073741824");
  expect_error(with_dims({~uint64_t{0}}), "absurd dimension 18446744073709551615");
  expect_error(with_dims({1, 1, 1, 1, 1}), "tensor 'w' has 5 dimensions (at most 4)");

  Bytes many;
  many.header(3, 1, 0).str("w").u32(0xffffffff).fill(64, 0);
  expect_error(many.bytes(), "has 4294967295 dimensions (at most 4)");

  Bytes scalar;  // zero dims: one element
  scalar.header(3, 1, 0).tensor("s", {}, kF32, 0).pad_to(32).f32(1.0f);
  const auto file = parse(scalar.bytes());
  EXPECT_EQ(file->tensors()[0].n_elements, 1u);
  EXPECT_EQ(file->tensors()[0].n_bytes, 4u);
}

TEST(GgufBytes, UnknownTypes) {
  for (uint32_t type_id : {4u, 5u, 29u, 31u, 1000u}) {
    Bytes b;
    b.header(3, 1, 0).tensor("w", {32}, type_id, 0).pad_to(32).fill(256, 0);
    expect_error(b.bytes(), "tensor 'w' has unknown or unsupported type id " + std::to_string(type_id));
  }
  Bytes blocks;
  blocks.header(3, 1, 0).tensor("q", {33}, kQ8_0, 0).pad_to(32).fill(256, 0);
  expect_error(blocks.bytes(), "tensor 'q': row length 33 is not a multiple of the Q8_0 block size 32");

  Bytes value;
  value.header(3, 0, 1).key("k", static_cast<ValueType>(13)).u64(0);
  expect_error(value.bytes(), "metadata key 'k': unknown value type 13");

  Bytes element;
  element.header(3, 0, 1).key("k", ValueType::Array).array_header(static_cast<ValueType>(0x80000000), 0);
  expect_error(element.bytes(), "metadata key 'k': unknown array element type 2147483648");
}

TEST(GgufBytes, MisalignedTensorOffset) {
  Bytes b;
  b.header(3, 1, 0).tensor("w", {4}, kF32, 16).pad_to(32).fill(64, 0);
  expect_error(b.bytes(), "tensor 'w' offset 16 is not aligned to 32");

  Bytes custom;
  custom.header(3, 1, 1).kv_u32("general.alignment", 64).tensor("w", {4}, kF32, 32).pad_to(64).fill(128, 0);
  expect_error(custom.bytes(), "tensor 'w' offset 32 is not aligned to 64");
}

TEST(GgufBytes, DuplicateKeysAndTensors) {
  Bytes keys;
  keys.header(3, 0, 2).kv_u32("k", 1).kv_string("k", "again");
  expect_error(keys.bytes(), "duplicate metadata key 'k'");

  Bytes tensors;
  tensors.header(3, 2, 0).tensor("w", {1}, kF32, 0).tensor("w", {1}, kF32, 32).pad_to(32).fill(64, 0);
  expect_error(tensors.bytes(), "duplicate tensor 'w'");
}

TEST(GgufBytes, BadBoolByte) {
  Bytes b;
  b.header(3, 0, 1).key("flag", ValueType::Bool).u8(2);
  expect_error(b.bytes(), "metadata key 'flag': invalid bool byte 2");

  Bytes in_array;
  in_array.header(3, 0, 1).key("flags", ValueType::Array).array_header(ValueType::Bool, 3).u8(0).u8(1).u8(0xff);
  expect_error(in_array.bytes(), "metadata key 'flags': invalid bool byte 255");
}

TEST(GgufBytes, BadAlignment) {
  for (uint32_t alignment : {0u, 3u, 48u, 0xffffffffu}) {
    Bytes b;
    b.header(3, 0, 1).kv_u32("general.alignment", alignment);
    expect_error(b.bytes(), "general.alignment " + std::to_string(alignment) + " is not a power of two");
  }
  Bytes wrong_type;
  wrong_type.header(3, 0, 1).key("general.alignment", ValueType::UInt64).u64(32);
  expect_error(wrong_type.bytes(), "general.alignment must be a u32, not a u64");

  Bytes huge;  // a valid but enormous alignment pushes the data section past the end
  huge.header(3, 1, 1).kv_u32("general.alignment", 0x80000000u).tensor("w", {1}, kF32, 0).fill(64, 0);
  expect_error(huge.bytes(), "tensor data would start at 2147483648 past the end");
}

TEST(GgufBytes, NestedArrays) {
  const auto nested = [](int levels) {
    Bytes b;
    b.header(3, 0, 1).key("deep", ValueType::Array);
    for (int i = 1; i < levels; ++i) b.array_header(ValueType::Array, 1);
    b.array_header(ValueType::UInt8, 1).u8(42);
    return b.bytes();
  };
  // Eight levels are fine, the ninth is refused; a thousand never reach the stack's limit.
  const auto file = parse(nested(8));
  const Value* v = &file->get("deep");
  const Array* a = &v->as_array();
  for (int i = 1; i < 8; ++i) a = &a->array_at(0);
  EXPECT_EQ(a->at(0).as_uint(), 42u);
  expect_error(nested(9), "metadata key 'deep': arrays nested too deeply");
  expect_error(nested(100000), "arrays nested too deeply");
}

// Heap bytes in use (glibc); 0 where malloc is replaced (sanitizer builds), and the memory tests skip.
size_t heap_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// Regression: each array element took a ~50-byte Value although its count is checked against the file's bytes,
// so a 2 GB file of u8 arrays asked for ~100 GB. Elements are stored in their on-disk width now.
TEST(GgufBytes, ArraysTakeNoMoreMemoryThanTheirBytes) {
  if (heap_in_use() == 0) GTEST_SKIP() << "mallinfo2 does not see this build's allocator";
  constexpr uint64_t kCount = 4 << 20;
  Bytes b;
  b.header(3, 0, 3).key("bytes", ValueType::Array).array_header(ValueType::UInt8, kCount).fill(kCount, 7);
  b.key("flags", ValueType::Array).array_header(ValueType::Bool, kCount).fill(kCount, 1);
  b.key("strings", ValueType::Array).array_header(ValueType::String, kCount / 8);
  for (uint64_t i = 0; i < kCount / 8; ++i) b.u64(0);
  const size_t before = heap_in_use();
  const auto file = parse(b.bytes());
  const size_t used = heap_in_use() - before;
  EXPECT_LT(used, b.size() + (1 << 20)) << "metadata took " << used << " bytes for a " << b.size() << "-byte file";
  const Array& bytes = file->get("bytes").as_array();
  ASSERT_EQ(bytes.size(), kCount);
  EXPECT_EQ(bytes.at(kCount - 1).as_uint(), 7u);
  EXPECT_EQ(file->get("flags").as_array().at(5).as_bool(), true);
  EXPECT_EQ(file->get("strings").as_array().size(), kCount / 8);
}

// Nested arrays need more memory than their 12 bytes on disk: in all they may take the file's size and a MiB.
TEST(GgufBytes, ArraysOfArraysAreBoundedByTheFileSize) {
  const auto arrays = [](uint64_t n) {
    Bytes b;
    b.header(3, 0, 1).key("a", ValueType::Array).array_header(ValueType::Array, n);
    for (uint64_t i = 0; i < n; ++i) b.array_header(ValueType::UInt8, 0);
    return b.bytes();
  };
  EXPECT_EQ(parse(arrays(1000))->get("a").as_array().size(), 1000u);
  expect_error(arrays(400000), "metadata key 'a': arrays of arrays would take more than");
}

// Regression: key and tensor names were put in messages verbatim, so a name with a newline or a megabyte of text
// made a multi-line or huge message.
TEST(GgufBytes, HostileNamesAreEscapedAndCutInMessages) {
  Bytes key;
  key.header(3, 0, 1).key("evil\nkey\x1b[31m\\", ValueType::Bool).u8(7);
  expect_error(key.bytes(), "metadata key 'evil\\x0akey\\x1b[31m\\x5c': invalid bool byte 7");

  Bytes long_key;
  long_key.header(3, 0, 1).key(std::string(1 << 20, 'k'), ValueType::Bool).u8(7);
  expect_error(long_key.bytes(), "'" + std::string(64, 'k') + "...(1048576 bytes)': invalid bool byte 7");

  Bytes tensor;
  tensor.header(3, 1, 0).tensor(std::string("t\0\n", 3), {4}, 99, 0).fill(64, 0);
  expect_error(tensor.bytes(), "tensor 't\\x00\\x0a' has unknown or unsupported type id 99");
}

}  // namespace
}  // namespace tessera::gguf
