// GGUF writer -> reader round trips (every value type, alignment, tensor tables), writer failures, and the
// real GGUF files shipped in ../shared.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_paths.h"

namespace tessera::gguf {
namespace {

namespace fs = std::filesystem;

// Exact structural equality: same declared type, same stored alternative, same bits.
bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<Array>(&a.data)) {
    const Array& y = std::get<Array>(b.data);
    if (x->element_type() != y.element_type() || x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i) {
      if (!same_value(x->at(i), y.at(i))) return false;
    }
    return true;
  }
  if (const auto* d = std::get_if<double>(&a.data)) {
    const double e = std::get<double>(b.data);
    return std::memcmp(d, &e, sizeof e) == 0;  // bitwise, so -0.0 and NaN payloads count too
  }
  if (const auto* u = std::get_if<uint64_t>(&a.data)) return *u == std::get<uint64_t>(b.data);
  if (const auto* i = std::get_if<int64_t>(&a.data)) return *i == std::get<int64_t>(b.data);
  if (const auto* f = std::get_if<bool>(&a.data)) return *f == std::get<bool>(b.data);
  return std::get<std::string>(a.data) == std::get<std::string>(b.data);
}

Value u8(uint8_t v) { return {ValueType::UInt8, uint64_t{v}}; }
Value i8(int8_t v) { return {ValueType::Int8, int64_t{v}}; }
Value u16(uint16_t v) { return {ValueType::UInt16, uint64_t{v}}; }
Value i16(int16_t v) { return {ValueType::Int16, int64_t{v}}; }
Value i64(int64_t v) { return {ValueType::Int64, v}; }
Value f64(double v) { return {ValueType::Float64, v}; }

// One fresh directory per test, removed afterwards.
class GgufRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_gguf_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::shared_ptr<File> write_and_open(const Writer& w, const std::string& name = "out.gguf") {
    w.write(path(name));
    return File::open(path(name));
  }

  std::vector<std::string> dir_entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

std::vector<std::pair<std::string, Value>> scalar_values() {
  return {
      {"u8", u8(255)},
      {"i8", i8(-128)},
      {"u16", u16(65535)},
      {"i16", i16(-32768)},
      {"u32", Value::make_u32(std::numeric_limits<uint32_t>::max())},
      {"i32", Value::make_i32(std::numeric_limits<int32_t>::min())},
      {"u64", Value::make_u64(std::numeric_limits<uint64_t>::max())},
      {"i64", i64(std::numeric_limits<int64_t>::min())},
      {"f32", Value::make_f32(-1.5e-3f)},
      {"f32.denormal", Value::make_f32(std::numeric_limits<float>::denorm_min())},
      {"f32.negzero", Value::make_f32(-0.0f)},
      {"f64", f64(3.141592653589793)},
      {"f64.inf", f64(-std::numeric_limits<double>::infinity())},
      {"bool.true", Value::make_bool(true)},
      {"bool.false", Value::make_bool(false)},
      {"string", Value::make_string("hello, GGUF")},
      {"string.empty", Value::make_string("")},
      {"string.binary", Value::make_string(std::string("a\0b\n\xff\xc3\xa9", 7))},
  };
}

TEST_F(GgufRoundTrip, EveryScalarType) {
  Writer w;
  const auto values = scalar_values();
  for (const auto& [k, v] : values) w.set(k, v);
  const auto file = write_and_open(w);
  EXPECT_EQ(file->version(), 3u);
  ASSERT_EQ(file->metadata().size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(file->metadata()[i].first, values[i].first);  // order is kept
    EXPECT_TRUE(same_value(file->metadata()[i].second, values[i].second)) << values[i].first;
  }
  EXPECT_EQ(file->get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(file->get("i64").as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(file->get_string("string.empty"), "");
  EXPECT_EQ(file->get_string("string.binary").size(), 7u);
  EXPECT_EQ(file->find_bool("bool.true"), true);
  EXPECT_FLOAT_EQ(static_cast<float>(file->get_float("f32")), -1.5e-3f);
  EXPECT_TRUE(file->tensors().empty());
}

TEST_F(GgufRoundTrip, ArraysOfEveryTypeIncludingEmptyAndNested) {
  Writer w;
  for (const auto& [k, v] : scalar_values()) {
    w.set("array." + k, Value::make_array(v.type, {v, v, v}));
    w.set("empty." + k, Value::make_array(v.type, {}));
  }
  w.set_string_array("strings", {"", "a", "", std::string(300, 'x')});
  w.set_f32_array("floats", {1.0f, -2.5f});
  w.set_i32_array("ints", {-1, 0, 1});
  // [[1, 2], [], [3]] and a three-level [[[u8]], []].
  const Value nested = Value::make_array(
      ValueType::Array, {Value::make_array(ValueType::Int32, {Value::make_i32(1), Value::make_i32(2)}),
                         Value::make_array(ValueType::Int32, {}),
                         Value::make_array(ValueType::Int32, {Value::make_i32(3)})});
  const Value deep = Value::make_array(
      ValueType::Array,
      {Value::make_array(ValueType::Array, {Value::make_array(ValueType::UInt8, {u8(7)})}),
       Value::make_array(ValueType::Array, {})});
  w.set("nested", nested);
  w.set("deep", deep);
  w.set("empty.array_of_arrays", Value::make_array(ValueType::Array, {}));

  const auto file = write_and_open(w);
  for (const auto& [k, v] : scalar_values()) {
    EXPECT_TRUE(same_value(file->get("array." + k), Value::make_array(v.type, {v, v, v}))) << k;
    const Array& empty = file->get("empty." + k).as_array();
    EXPECT_EQ(empty.element_type(), v.type) << k;
    EXPECT_TRUE(empty.empty()) << k;
  }
  const Array& strings = file->get("strings").as_array();
  ASSERT_EQ(strings.size(), 4u);
  EXPECT_EQ(strings.string_at(0), "");
  EXPECT_EQ(strings.string_at(3), std::string(300, 'x'));
  EXPECT_EQ(file->get("floats").as_array().at(1).as_float(), -2.5);
  EXPECT_EQ(file->get("ints").as_array().at(0).as_int(), -1);
  EXPECT_TRUE(same_value(file->get("nested"), nested));
  EXPECT_TRUE(same_value(file->get("deep"), deep));
  EXPECT_EQ(file->get("empty.array_of_arrays").as_array().element_type(), ValueType::Array);
}

TEST_F(GgufRoundTrip, TypedGettersReportMissingAndMistypedKeys) {
  Writer w;
  w.set_string("name", "x");
  w.set("neg", i64(-5));
  const auto file = write_and_open(w);
  EXPECT_EQ(file->find("absent"), nullptr);
  EXPECT_EQ(file->find_uint("absent"), std::nullopt);
  try {
    file->get_uint("absent");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing required metadata key 'absent'"), std::string::npos) << e.what();
  }
  try {
    file->get_uint("name");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'name': expected an integer, got a string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(file->get_uint("neg"), Error);
  EXPECT_EQ(file->get_float("neg"), -5.0);
  EXPECT_THROW(file->find_bool("name"), Error);
}

struct TensorCase {
  const char* name;
  TensorType type;
  std::vector<uint64_t> dims;
  uint64_t n_elements;
  uint64_t n_bytes;
};

const std::vector<TensorCase>& tensor_cases() {
  static const std::vector<TensorCase> cases = {
      {"f32", TensorType::F32, {3}, 3, 12},
      {"f16", TensorType::F16, {4, 2}, 8, 16},
      {"bf16", TensorType::BF16, {2, 3, 2}, 12, 24},
      {"q8_0", TensorType::Q8_0, {64, 2}, 128, 4 * 34},
      {"q4_0", TensorType::Q4_0, {32}, 32, 18},
      {"q4_k", TensorType::Q4_K, {256, 1, 1, 2}, 512, 2 * 144},
      {"q6_k", TensorType::Q6_K, {512, 3}, 1536, 6 * 210},
      {"i8", TensorType::I8, {5, 3, 2, 1}, 30, 30},
  };
  return cases;
}

std::vector<uint8_t> pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return bytes;
}

void check_tensors(const File& file, uint64_t alignment) {
  ASSERT_EQ(file.alignment(), alignment);
  EXPECT_EQ(file.data_offset() % alignment, 0u);
  ASSERT_EQ(file.tensors().size(), tensor_cases().size());
  uint64_t expected_offset = 0;
  for (size_t i = 0; i < tensor_cases().size(); ++i) {
    const TensorCase& c = tensor_cases()[i];
    const TensorInfo& t = file.tensors()[i];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(t.name, c.name);
    EXPECT_EQ(t.type, c.type);
    EXPECT_EQ(t.dims, c.dims);
    EXPECT_EQ(t.n_elements, c.n_elements);
    EXPECT_EQ(t.n_bytes, c.n_bytes);
    EXPECT_EQ(t.row_length(), c.dims[0]);
    EXPECT_EQ(t.n_rows(), c.n_elements / c.dims[0]);
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u);  // mmap is page-aligned
    const auto expected = pattern(c.n_bytes, static_cast<uint8_t>(i));
    EXPECT_EQ(std::memcmp(t.data, expected.data(), c.n_bytes), 0);
    EXPECT_EQ(file.find_tensor(c.name), &t);
    expected_offset += (c.n_bytes + alignment - 1) / alignment * alignment;
  }
  EXPECT_EQ(file.data_offset() + expected_offset, file.file_size());
  EXPECT_EQ(file.find_tensor("absent"), nullptr);
}

void add_tensor_cases(Writer& w) {
  for (size_t i = 0; i < tensor_cases().size(); ++i) {
    const TensorCase& c = tensor_cases()[i];
    w.add_tensor(c.name, c.type, c.dims, pattern(c.n_bytes, static_cast<uint8_t>(i)));
  }
}

TEST_F(GgufRoundTrip, TensorInfosDefaultAlignment) {
  Writer w;
  w.set_string("general.architecture", "test");
  add_tensor_cases(w);
  size_t calls = 0;
  w.write(path("t.gguf"), [&](size_t done, size_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, tensor_cases().size());
  });
  EXPECT_EQ(calls, tensor_cases().size());
  const auto file = File::open(path("t.gguf"));
  EXPECT_EQ(file->find("general.alignment"), nullptr);  // 32 is the default and is not written
  check_tensors(*file, 32);
}

TEST_F(GgufRoundTrip, TensorInfosAlignment64And1) {
  for (uint64_t alignment : {64u, 1u, 4096u}) {
    SCOPED_TRACE(alignment);
    Writer w(alignment);
    add_tensor_cases(w);
    const auto file = write_and_open(w);
    EXPECT_EQ(file->get_uint("general.alignment"), alignment);
    check_tensors(*file, alignment);
  }
}

// Regression: an explicit general.alignment key used to be written while the writer padded to its constructor's
// alignment (32), so the reader found offsets misaligned for the declared 64.
TEST_F(GgufRoundTrip, ExplicitAlignmentKeyDecidesPadding) {
  Writer w;
  w.set_u32("general.alignment", 64);
  add_tensor_cases(w);
  const auto file = write_and_open(w);
  check_tensors(*file, 64);

  Writer w2(128);
  w2.set_u32("general.alignment", 32);  // the key wins over the constructor
  add_tensor_cases(w2);
  check_tensors(*write_and_open(w2, "b.gguf"), 32);
}

// Regression (found while writing gguf_roundtrip_fuzzer): the reader accepts a tensor with no dims as one element,
// but the writer refused to write one back.
TEST_F(GgufRoundTrip, ScalarTensorWithNoDims) {
  Writer w;
  w.add_tensor("scale", TensorType::F32, {}, pattern(4, 9));
  EXPECT_THROW(w.add_tensor("q", TensorType::Q8_0, {}, std::vector<uint8_t>(34)), Error);  // 1 is not a block
  const auto file = write_and_open(w);
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_TRUE(file->tensors()[0].dims.empty());
  EXPECT_EQ(file->tensors()[0].n_elements, 1u);
  EXPECT_EQ(file->tensors()[0].n_bytes, 4u);
  EXPECT_EQ(std::memcmp(file->tensors()[0].data, pattern(4, 9).data(), 4), 0);
}

TEST_F(GgufRoundTrip, FromMemoryMatchesOpen) {
  Writer w(64);
  w.set_string("k", "v");
  add_tensor_cases(w);
  const auto mapped = write_and_open(w);
  std::ifstream in(path("out.gguf"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto memory = File::from_memory(bytes, "memory");
  EXPECT_EQ(memory->name(), "memory");
  EXPECT_EQ(memory->file_size(), bytes.size());
  EXPECT_EQ(memory->data_offset(), mapped->data_offset());
  ASSERT_EQ(memory->tensors().size(), mapped->tensors().size());
  for (size_t i = 0; i < memory->tensors().size(); ++i) {
    EXPECT_EQ(memory->tensors()[i].data, bytes.data() + memory->data_offset() + memory->tensors()[i].offset);
  }
}

// ----- Writer failures -----

TEST_F(GgufRoundTrip, UnwritablePathThrowsAndLeavesNothing) {
  Writer w;
  w.set_string("k", "v");
  try {
    w.write(path("missing_dir/out.gguf"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_TRUE(dir_entries().empty());

  // The temp file is created but the rename onto a directory fails: the temp file must be gone.
  fs::create_directory(path("is_a_dir"));
  try {
    w.write(path("is_a_dir"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot rename"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir_entries(), std::vector<std::string>{"is_a_dir"});
}

TEST_F(GgufRoundTrip, FailingProducerKeepsOldFileAndLeavesNoTemp) {
  Writer good;
  good.set_string("version", "old");
  good.write(path("m.gguf"));

  Writer bad;
  bad.set_string("version", "new");
  bad.add_tensor("t", TensorType::F32, {4}, [](uint8_t*, uint64_t) { throw Error("producer failed"); });
  EXPECT_THROW(bad.write(path("m.gguf")), Error);
  Writer wrong_size;
  wrong_size.add_tensor("t", TensorType::F32, {4}, std::vector<uint8_t>(15));
  EXPECT_THROW(wrong_size.write(path("m.gguf")), Error);

  EXPECT_EQ(dir_entries(), std::vector<std::string>{"m.gguf"});
  EXPECT_EQ(File::open(path("m.gguf"))->get_string("version"), "old");
}

// Regressions: each of these used to write a file that no reader accepts (or crash with SIGFPE for alignment 0).
TEST_F(GgufRoundTrip, WriterRejectsWhatItCannotWriteFaithfully) {
  const auto expect_write_error = [&](const Writer& w, const std::string& what) {
    try {
      w.write(path("x.gguf"));
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_TRUE(dir_entries().empty());
  };
  expect_write_error(Writer(0), "alignment 0 is not a power of two");
  expect_write_error(Writer(48), "alignment 48 is not a power of two");
  expect_write_error(Writer(uint64_t{1} << 33), "is not a power of two that fits a u32");
  {
    Writer w;
    w.set("general.alignment", Value::make_u64(64));
    expect_write_error(w, "general.alignment must be a u32");
  }
  // An array holds one type: a stray element, or one too wide for the element type, never gets in.
  EXPECT_THROW(
      {
        try {
          Value::make_array(ValueType::UInt8, {u8(1), Value::make_string("two")});
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "string element in an array of u8");
          throw;
        }
      },
      Error);
  EXPECT_THROW(Value::make_array(ValueType::UInt8, {Value{ValueType::UInt8, uint64_t{256}}}), Error);
  {
    Writer w;
    w.set("b", Value{ValueType::UInt8, uint64_t{300}});
    expect_write_error(w, "metadata key 'b': 300 does not fit a u8");
  }
  {
    Writer w;
    w.set("c", Value{ValueType::Int16, int64_t{-40000}});
    expect_write_error(w, "metadata key 'c': -40000 does not fit a i16");
  }
  {
    Writer w;
    w.set("d", Value{static_cast<ValueType>(42), uint64_t{1}});
    expect_write_error(w, "unknown value type 42");
  }

  Writer w;
  EXPECT_THROW(w.add_tensor("five", TensorType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor("zero", TensorType::F32, {4, 0}, std::vector<uint8_t>()), Error);
  EXPECT_THROW(w.add_tensor("huge", TensorType::F32, {uint64_t{1} << 40, uint64_t{1} << 40}, std::vector<uint8_t>()),
               Error);
  EXPECT_THROW(w.add_tensor("q", TensorType::Q8_0, {33}, std::vector<uint8_t>()), Error);
  w.add_tensor("t", TensorType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("t", TensorType::F32, {1}, std::vector<uint8_t>(4)), Error);
}

// ----- Real files -----

TEST(GgufRealFiles, LlamaTinyRandomModel) {
  const auto file = File::open(testing::shared_path("models/llama-2-tiny-random.gguf"));
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_string("general.name"), "LLaMA v2");
  EXPECT_EQ(file->get_uint("llama.context_length"), 4096u);
  EXPECT_EQ(file->get_uint("llama.embedding_length"), 8u);
  EXPECT_EQ(file->get_uint("llama.attention.head_count"), 2u);
  EXPECT_NEAR(file->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  const Array& tokens = file->get("tokenizer.ggml.tokens").as_array();
  EXPECT_EQ(tokens.element_type(), ValueType::String);
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens.string_at(0), "<unk>");
  EXPECT_EQ(tokens.string_at(1), "<s>");
  EXPECT_EQ(tokens.string_at(2), "</s>");
  EXPECT_EQ(file->get("tokenizer.ggml.scores").as_array().size(), 32000u);
  EXPECT_EQ(file->get("tokenizer.ggml.token_type").as_array().element_type(), ValueType::Int32);

  ASSERT_EQ(file->tensors().size(), 12u);
  const TensorInfo* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, TensorType::F16);
  EXPECT_EQ(embd->dims, (std::vector<uint64_t>{8, 32000}));
  EXPECT_EQ(embd->offset, 0u);
  EXPECT_EQ(embd->n_bytes, 512000u);
  const TensorInfo* norm = file->find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, TensorType::F32);
  EXPECT_EQ(norm->n_bytes, 32u);
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_LE(file->data_offset() + t.offset + t.n_bytes, file->file_size()) << t.name;
  }
}

TEST_F(GgufRoundTrip, RealModelRewritesIdentically) {
  const auto original = File::open(testing::shared_path("models/llama-2-tiny-random.gguf"));
  Writer w(original->alignment());
  for (const auto& [k, v] : original->metadata()) w.set(k, v);
  for (const TensorInfo& t : original->tensors()) {
    const uint8_t* src = t.data;
    w.add_tensor(t.name, t.type, t.dims, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
  }
  const auto copy = write_and_open(w);
  ASSERT_EQ(copy->metadata().size(), original->metadata().size());
  for (size_t i = 0; i < copy->metadata().size(); ++i) {
    EXPECT_EQ(copy->metadata()[i].first, original->metadata()[i].first);
    EXPECT_TRUE(same_value(copy->metadata()[i].second, original->metadata()[i].second)) << copy->metadata()[i].first;
  }
  ASSERT_EQ(copy->tensors().size(), original->tensors().size());
  for (size_t i = 0; i < copy->tensors().size(); ++i) {
    const TensorInfo& a = copy->tensors()[i];
    const TensorInfo& b = original->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.dims, b.dims);
    EXPECT_EQ(a.type, b.type);
    EXPECT_EQ(a.offset, b.offset);
    ASSERT_EQ(a.n_bytes, b.n_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
  }
  EXPECT_EQ(copy->file_size(), original->file_size());
}

struct VocabCase {
  const char* file;
  const char* architecture;
  const char* model;
  size_t n_tokens;
};

TEST(GgufRealFiles, TokenizerVocabularies) {
  const VocabCase cases[] = {
      {"ggml-vocab-llama-spm.gguf", "llama", "llama", 32000},
      {"ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", 50257},
      {"ggml-vocab-phi-3.gguf", "phi3", "llama", 32064},
  };
  for (const VocabCase& c : cases) {
    SCOPED_TRACE(c.file);
    const auto file = File::open(testing::shared_path(std::string("tokenizer-vectors/") + c.file));
    EXPECT_EQ(file->version(), 3u);
    EXPECT_TRUE(file->tensors().empty());
    EXPECT_EQ(file->get_string("general.architecture"), c.architecture);
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), c.model);
    const Array& tokens = file->get("tokenizer.ggml.tokens").as_array();
    EXPECT_EQ(tokens.element_type(), ValueType::String);
    EXPECT_EQ(tokens.size(), c.n_tokens);
    EXPECT_EQ(file->get("tokenizer.ggml.token_type").as_array().size(), c.n_tokens);
  }
  const auto spm = File::open(testing::shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(spm->find_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(spm->find_bool("tokenizer.ggml.add_eos_token"), false);
  EXPECT_EQ(spm->get_uint("llama.vocab_size"), 32000u);
  EXPECT_EQ(spm->get("tokenizer.ggml.tokens").as_array().string_at(1), "<s>");
  const auto gpt2 = File::open(testing::shared_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(gpt2->get("tokenizer.ggml.merges").as_array().size(), 50000u);
  EXPECT_EQ(gpt2->get_uint("tokenizer.ggml.bos_token_id"), 50256u);
  const auto phi3 = File::open(testing::shared_path("tokenizer-vectors/ggml-vocab-phi-3.gguf"));
  EXPECT_NE(phi3->get_string("tokenizer.chat_template").find("<|user|>"), std::string::npos);
}

TEST(GgufRealFiles, MissingFileIsAnError) {
  try {
    File::open("/nonexistent/tessera.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tessera.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::gguf
