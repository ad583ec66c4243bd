// A Hugging Face config.json for the architectures Tessera runs, read into the terms of GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "model/rope_scaling.h"

namespace tessera {

enum class HfRopeScaling { None, Linear, Llama3 };

struct HfConfig {
  std::string hf_architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string arch;             // GGUF general.architecture: "llama" (Llama, Mistral), "qwen2", "qwen3"
  // HF Llama/Mistral checkpoints rotate halves (NeoX order); GGUF "llama" files store q/k rows permuted so that
  // adjacent pairs rotate. Qwen is NeoX in both.
  bool permute_qk = false;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
  int64_t n_ctx = 0;           // max_position_embeddings, or the sliding window when that is smaller
  int64_t max_positions = 0;   // max_position_embeddings as written
  int64_t sliding_window = 0;  // Mistral: > 0 when smaller than max_position_embeddings (see n_ctx)
  double rms_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tied = false;     // tie_word_embeddings: no lm_head.weight, the output reuses the embedding
  bool qkv_bias = false; // Qwen2 always; Llama/Qwen3 when attention_bias
  bool qk_norm = false;  // Qwen3
  HfRopeScaling rope_scaling = HfRopeScaling::None;
  double rope_linear_factor = 1.0;
  Llama3RopeScaling llama3;
  std::string torch_dtype;  // informational
};

// Reads and checks config.json. Throws tessera::Error naming the file and field: a missing or out-of-range
// size, an architecture other than LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM
// ("unsupported architecture 'X' (supported: ...)"), an activation other than SiLU, a rope_scaling type
// other than llama3/linear, or Qwen's use_sliding_window.
HfConfig read_hf_config(const std::string& path);

}  // namespace tessera
