// Writes the tiny seed files of fuzz/corpus/gguf with the real writer: usage `make_gguf_corpus DIR`.
// Each seed exercises one area of the format so the fuzzer starts from valid structure everywhere.
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf_writer.h"

namespace {

using tessera::TensorType;
using tessera::gguf::Value;
using tessera::gguf::ValueType;
using tessera::gguf::Writer;

std::vector<uint8_t> filled(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

void write_seeds(const std::string& dir) {
  {  // every scalar type
    Writer w;
    w.set("u8", {ValueType::UInt8, uint64_t{200}});
    w.set("i8", {ValueType::Int8, int64_t{-3}});
    w.set("u16", {ValueType::UInt16, uint64_t{60000}});
    w.set("i16", {ValueType::Int16, int64_t{-300}});
    w.set_u32("u32", 7);
    w.set_i32("i32", -7);
    w.set("u64", Value::make_u64(1));
    w.set("i64", {ValueType::Int64, int64_t{-1}});
    w.set_f32("f32", 0.25f);
    w.set("f64", {ValueType::Float64, 2.5});
    w.set_bool("b", true);
    w.set_string("s", "gguf");
    w.write(dir + "/scalars.gguf");
  }
  {  // arrays: strings, numbers, empty, nested
    Writer w;
    w.set_string_array("tok", {"<s>", "", "ab"});
    w.set_f32_array("f", {1.0f, -1.0f});
    w.set_i32_array("e", {});
    w.set("n", Value::make_array(ValueType::Array, {Value::make_array(ValueType::Bool, {Value::make_bool(false)}),
                                                    Value::make_array(ValueType::UInt8, {})}));
    w.write(dir + "/arrays.gguf");
  }
  {  // a small model-like file: plain and quantized tensors, default alignment
    Writer w;
    w.set_string("general.architecture", "llama");
    w.add_tensor("a", TensorType::F32, {2, 2}, filled(16, 1));
    w.add_tensor("h", TensorType::F16, {3}, filled(6, 2));
    w.add_tensor("q", TensorType::Q8_0, {32}, filled(34, 3));
    w.add_tensor("i", TensorType::I8, {1, 1, 1, 2}, filled(2, 4));
    w.write(dir + "/tensors.gguf");
  }
  {  // K-quants with a non-default alignment key
    Writer w(64);
    w.add_tensor("k", TensorType::Q4_K, {256}, filled(144, 5));
    w.add_tensor("b", TensorType::BF16, {1}, filled(2, 6));
    w.write(dir + "/align64.gguf");
  }
  {  // the smallest file
    Writer w;
    w.write(dir + "/empty.gguf");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    write_seeds(argv[1]);
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "make_gguf_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
