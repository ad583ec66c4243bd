// Small random Hugging Face model folders for tests: config.json, safetensors (single or sharded, F32/F16/BF16),
// a tiny byte-level tokenizer.json with tokenizer_config.json and generation_config.json. The weights are also
// returned as a RefModel with Hugging Face semantics (rotate-half RoPE on the stored q/k rows, llama3 frequency
// divisors from the config's formula), computed without any of Tessera's loading code.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference_model.h"

namespace tessera::testing {

struct HfSpec {
  std::string architecture = "LlamaForCausalLM";
  int64_t n_embd = 32, n_layer = 2, n_head = 4, n_head_kv = 2;
  int64_t head_dim = 0;  // 0: leave head_dim out of config.json (hidden_size / num_attention_heads)
  int64_t n_ff = 48;
  int64_t n_vocab = 280;  // embedding rows; the tokenizer has 262 tokens
  bool tied = false;
  bool attention_bias = false;  // Llama/Qwen3 config flag; Qwen2 always has q/k/v biases
  std::string dtype = "F32";    // F32, F16 or BF16
  int shards = 1;               // > 1: model-0000N-of-0000M.safetensors with model.safetensors.index.json
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  nlohmann::json rope_scaling;  // null: none
  int64_t max_positions = 64;
  int64_t sliding_window = 0;   // > 0: written to config.json
};

// A spec with the given shape and everything else at its default.
HfSpec hf_spec(const char* architecture, int64_t n_embd, int64_t n_head, int64_t n_head_kv, int64_t head_dim, bool tied,
               const char* dtype);
// The two shapes the round-trip tests use: Qwen3 (QK-norm, head_dim 12 != 32/4, tied, BF16, theta 1e6) and
// Llama 3 (llama3 rope scaling over an original context of 32, GQA, untied, F16, two shards, theta 5e5).
HfSpec qwen3_test_spec();
HfSpec llama3_test_spec();

struct HfTestModel {
  std::string dir;
  RefModel ref;  // weights as stored (rounded to dtype), Hugging Face semantics
};

// Writes the folder into `dir` (created; existing files overwritten).
HfTestModel write_hf_folder(const HfSpec& spec, const std::string& dir, uint32_t seed);

// safetensors bytes for named fp32 tensors stored as `dtype`, header padded to 8 bytes as the format advises.
struct StTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::vector<float> values;
};
std::string safetensors_bytes(const std::vector<StTensor>& tensors, const std::string& dtype);
// The same for tensors given as raw little-endian bytes, each with its own dtype.
struct StRawTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::string bytes;
};
std::string safetensors_raw(const std::vector<StRawTensor>& tensors);

// The tokenizer files alone (tokenizer.json, tokenizer_config.json, generation_config.json) into `dir`.
void write_tiny_tokenizer(const std::string& dir);
inline constexpr int32_t kTinyEndOfText = 259, kTinyImStart = 260, kTinyImEnd = 261, kTinyTokens = 262;

// A fresh, empty directory under /tmp, removed with everything in it when the object goes.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& stem);
  ~TempDir();
};

}  // namespace tessera::testing
