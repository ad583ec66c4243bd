// Shared by the tokenizer tests: llama.cpp's vocab-test vectors (NAME.inp / NAME.out) and small helpers.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace tessera::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

// NAME.inp: every input is followed by "\n__ggml_vocab_test__\n" (so inputs carry no trailing newline of
// their own); NAME.out: one line of ids per input, in order.
inline std::vector<VectorCase> read_vectors(const std::string& name) {
  const std::string inp = read_file(shared_path("tokenizer-vectors/" + name + ".inp"));
  const std::string out = read_file(shared_path("tokenizer-vectors/" + name + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VectorCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(separator, pos);
    EXPECT_NE(end, std::string::npos) << "input without a separator at offset " << pos;
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    EXPECT_LT(i, cases.size()) << "more output lines than inputs";
    if (i >= cases.size()) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, cases.size()) << name << ": inputs and output lines differ in number";
  return cases;
}

inline std::string describe(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// `count` strings of 0..63 arbitrary bytes (invalid UTF-8 and NULs included) from a fixed LCG seed.
inline std::vector<std::string> random_byte_strings(uint32_t seed, int count) {
  std::vector<std::string> out;
  uint32_t state = seed;
  for (int i = 0; i < count; ++i) {
    std::string text;
    state = state * 1664525u + 1013904223u;
    const size_t length = (state >> 8) % 64;
    for (size_t j = 0; j < length; ++j) {
      state = state * 1664525u + 1013904223u;
      text.push_back(static_cast<char>(state >> 24));
    }
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace tessera::testing
