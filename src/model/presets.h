// Shapes of published models (hyper-parameters only, no weights), for synthetic models and benchmarks.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "model/model_config.h"

namespace tessera {

struct ModelPreset {
  std::string_view name;          // "tinyllama-1.1b"
  std::string_view architecture;  // GGUF general.architecture
  int64_t n_embd;
  int64_t n_layer;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;  // may differ from n_embd / n_head (Qwen3)
  int64_t n_ff;
  int64_t n_vocab;   // embedding rows (can exceed the tokenizer's size, as Qwen's do)
  int64_t n_ctx;
  float rope_theta;
  float rms_eps;
  bool tied_output;  // lm head shares token_embd
  bool qkv_bias;     // Qwen2
  bool qk_norm;      // Qwen3
  bool hidden;       // small shapes for tests; not listed in help texts
};

// Every preset, published ones first.
std::span<const ModelPreset> model_presets();

// The preset called `name`, or null.
const ModelPreset* find_model_preset(std::string_view name);

// Names of the published presets, comma separated (for help and error messages).
std::string model_preset_names();

// The configuration a model with this shape loads with.
ModelConfig preset_config(const ModelPreset& preset);

}  // namespace tessera
