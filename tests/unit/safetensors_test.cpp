// safetensors reader: well-formed files in each dtype, sharded folders, and every kind of malformed header or
// folder giving a one-line tessera::Error rather than a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fp16.h"
#include "formats/safetensors.h"
#include "hf_test_folder.h"

namespace tessera {
namespace {

using nlohmann::json;
using testing::safetensors_bytes;
using testing::StTensor;
using testing::TempDir;

std::span<const uint8_t> span_of(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

// A file made of a header given as text (not padded) and `data_bytes` zero bytes.
std::string raw_file(const std::string& header, size_t data_bytes) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + std::string(data_bytes, '\0');
}

// Parses and expects a tessera::Error whose one-line message contains `needle`.
void expect_bad(const std::string& bytes, const std::string& needle) {
  try {
    SafetensorsFile::from_memory(span_of(bytes), "bad.safetensors");
    ADD_FAILURE() << "no error; expected '" << needle << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind("bad.safetensors: ", 0), 0u) << message;
  }
}

TEST(Safetensors, ReadsEveryDtype) {
  const std::vector<StTensor> tensors = {{"b", {2, 3}, {1, -2, 3.5f, 0.25f, -0.5f, 8}}, {"a", {3}, {1, 2, 3}}};
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    const std::string bytes = safetensors_bytes(tensors, dtype);
    const auto file = SafetensorsFile::from_memory(span_of(bytes), "ok.safetensors");
    ASSERT_EQ(file->tensors().size(), 2u);
    const SafetensorsTensor* b = file->find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->shape, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(b->n_elements, 6u);
    const TensorType type = std::string(dtype) == "F32" ? TensorType::F32
                            : std::string(dtype) == "F16" ? TensorType::F16 : TensorType::BF16;
    EXPECT_EQ(b->type, type);
    float third = 0;
    if (type == TensorType::F32) {
      std::memcpy(&third, b->data + 8, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b->data + 4, 2);
      third = type == TensorType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
    EXPECT_EQ(third, 3.5f) << dtype;
    EXPECT_EQ(file->find("missing"), nullptr);
  }
}

TEST(Safetensors, EmptyFileAndScalars) {
  const auto empty = SafetensorsFile::from_memory(span_of(raw_file("{}", 0)), "empty.safetensors");
  EXPECT_TRUE(empty->tensors().empty());
  const std::string header = R"({"__metadata__": {"format": "pt"}, "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
                                 "z": {"dtype": "F16", "shape": [0, 5], "data_offsets": [4, 4]}})";
  const auto file = SafetensorsFile::from_memory(span_of(raw_file(header, 4)), "scalar.safetensors");
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->find("s")->n_elements, 1u);
  EXPECT_EQ(file->find("z")->n_bytes, 0u);
}

TEST(Safetensors, MalformedFilesAreErrors) {
  const std::string good = R"({"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  expect_bad("", "only 0 bytes");
  expect_bad(std::string("\x10\0\0\0", 4), "only 4 bytes");
  std::string truncated = raw_file(good, 16);
  expect_bad(truncated.substr(0, 20), "truncated safetensors file");
  const uint64_t huge = ~uint64_t{0};
  expect_bad(std::string(reinterpret_cast<const char*>(&huge), 8) + good, "truncated safetensors file");
  expect_bad(raw_file("{\"t\": {\"dtype\": \"F32\",\n\"shape\": [2", 16), "not valid JSON");
  expect_bad(raw_file("[1, 2]", 0), "not a JSON object");
  expect_bad(raw_file(R"({"t": 5})", 0), "entry is not an object");
  expect_bad(raw_file(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4), "missing dtype");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4), "missing shape");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4), "data_offsets must be");
  expect_bad(raw_file(R"({"t": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}})", 4), "unknown dtype 'Q4'");
  expect_bad(raw_file(R"({"t": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8),
             "tensor 't' has dtype F64, which is not supported (F32, F16, BF16)");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4), "non-negative integer");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 4]}})", 4), "non-negative integer");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4), "non-negative integer");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})", 8), "reversed");
  // Offsets past the end of the file.
  expect_bad(raw_file(good, 12), "run past the end of the file");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551615]}})", 4),
             "run past the end");
  // dtype x shape disagrees with the byte range.
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 16]}})", 16),
             "F32 [2, 3] needs 24 bytes but data_offsets [0, 16] hold 16");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1099511627777], "data_offsets": [0, 4]}})", 4), "absurd");
  expect_bad(raw_file(R"({"t": {"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 4]}})", 4),
             "absurd");
  // Misaligned, overlapping, holes, trailing bytes.
  expect_bad(raw_file(R"({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]},
                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})", 6),
             "not aligned to its 4-byte elements");
  expect_bad(raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
             "overlaps");
  expect_bad(raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12),
             "bytes 4..8 of the data belong to no tensor");
  expect_bad(raw_file(good, 20), "4 bytes after the last tensor");
  // A hostile name cannot break the message into lines.
  expect_bad(raw_file("{\"evil\\nname\": {\"dtype\": \"I8\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1),
             "tensor 'evil\\x0aname' has dtype I8");
}

void write(const std::filesystem::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(SafetensorsFolder, SingleAndShardedFolders) {
  TempDir single("st_single");
  write(std::filesystem::path(single.path) / "model.safetensors",
        safetensors_bytes({{"x", {2}, {1, 2}}, {"y", {1}, {3}}}, "F32"));
  const auto one = SafetensorsFolder::open(single.path);
  ASSERT_EQ(one->tensors().size(), 2u);
  EXPECT_EQ(one->tensors()[0]->name, "x");
  EXPECT_NE(one->find("y"), nullptr);

  TempDir sharded("st_sharded");
  const std::filesystem::path dir = sharded.path;
  write(dir / "a.safetensors", safetensors_bytes({{"x", {2}, {1, 2}}, {"extra", {1}, {9}}}, "F16"));
  write(dir / "b.safetensors", safetensors_bytes({{"y", {1}, {3}}}, "BF16"));
  write(dir / "model.safetensors.index.json",
        json({{"weight_map", {{"x", "a.safetensors"}, {"y", "b.safetensors"}}}}).dump());
  const auto two = SafetensorsFolder::open(sharded.path);
  EXPECT_EQ(two->shards().size(), 2u);
  ASSERT_EQ(two->tensors().size(), 2u);  // what the weight map names; "extra" is not part of the model
  EXPECT_EQ(two->find("y")->type, TensorType::BF16);
  EXPECT_EQ(two->shard_name(*two->find("y")), (dir / "b.safetensors").string());
}

void expect_folder_error(const std::string& dir, const std::string& needle) {
  try {
    SafetensorsFolder::open(dir);
    ADD_FAILURE() << "no error; expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(SafetensorsFolder, BrokenFoldersAreErrors) {
  TempDir t("st_broken");
  const std::filesystem::path dir = t.path;
  expect_folder_error(t.path, "no model.safetensors or model.safetensors.index.json");
  write(dir / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_folder_error(t.path, "not valid JSON");
  write(dir / "model.safetensors.index.json", json({{"metadata", {}}}).dump());
  expect_folder_error(t.path, "no weight_map");
  write(dir / "model.safetensors.index.json", json({{"weight_map", {{"x", "a.safetensors"}}}}).dump());
  expect_folder_error(t.path, "missing shard 'a.safetensors'");
  write(dir / "model.safetensors.index.json", json({{"weight_map", {{"x", "../../etc/passwd"}}}}).dump());
  expect_folder_error(t.path, "is not a file name in the folder");
  write(dir / "a.safetensors", safetensors_bytes({{"y", {1}, {3}}}, "F32"));
  write(dir / "model.safetensors.index.json", json({{"weight_map", {{"x", "a.safetensors"}}}}).dump());
  expect_folder_error(t.path, "tensor 'x' is not in shard 'a.safetensors'");
  write(dir / "a.safetensors", "\x01\x02");
  expect_folder_error(t.path, "not a safetensors file");
}

}  // namespace
}  // namespace tessera
