// The preset table. Values follow each model's published config.json (Hugging Face); where a model's
// context window exceeds what a benchmark needs, the published value is still stored.
#include "model/presets.h"

#include <array>

namespace tessera {
namespace {

// name, arch, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx, rope_theta, rms_eps,
// tied, qkv_bias, qk_norm, hidden
constexpr std::array kPresets = {
    ModelPreset{"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 64, 5632, 32000, 2048, 10000.0f, 1e-5f,
                false, false, false, false},
    // Llama 3.2 uses "llama3" RoPE frequency scaling beyond 8K positions; benchmarks stay far below that.
    ModelPreset{"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 500000.0f, 1e-5f,
                true, false, false, false},
    ModelPreset{"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1000000.0f, 1e-6f,
                true, true, false, false},
    ModelPreset{"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, 1e-6f,
                true, false, true, false},
    ModelPreset{"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1000000.0f, 1e-6f,
                false, false, true, false},
    ModelPreset{"qwen3-32b", "qwen3", 5120, 64, 64, 8, 128, 25600, 151936, 40960, 1000000.0f, 1e-6f,
                false, false, true, false},
    // Test shapes: each architecture path (plain Llama; Qwen2 biases with a row length that K-quants cannot
    // hold; Qwen3 q/k norms with head_dim ≠ n_embd / n_head) in a few hundred kilobytes.
    ModelPreset{"test-tiny", "llama", 256, 2, 4, 2, 64, 512, 384, 256, 10000.0f, 1e-5f,
                false, false, false, true},
    ModelPreset{"test-tiny-qwen2", "qwen2", 96, 2, 3, 1, 32, 256, 384, 256, 1000000.0f, 1e-6f,
                true, true, false, true},
    ModelPreset{"test-tiny-qwen3", "qwen3", 256, 2, 8, 2, 64, 512, 384, 256, 1000000.0f, 1e-6f,
                true, false, true, true},
};

}  // namespace

std::span<const ModelPreset> model_presets() { return kPresets; }

const ModelPreset* find_model_preset(std::string_view name) {
  for (const ModelPreset& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string model_preset_names() {
  std::string names;
  for (const ModelPreset& p : kPresets) {
    if (p.hidden) continue;
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  return names;
}

ModelConfig preset_config(const ModelPreset& p) {
  ModelConfig c;
  c.architecture = std::string(p.architecture);
  c.n_vocab = p.n_vocab;
  c.n_embd = p.n_embd;
  c.n_layer = p.n_layer;
  c.n_head = p.n_head;
  c.n_head_kv = p.n_head_kv;
  c.head_dim = p.head_dim;
  c.n_ff = p.n_ff;
  c.n_ctx_train = p.n_ctx;
  c.rms_eps = p.rms_eps;
  c.rope_theta = p.rope_theta;
  // The loader's rule (model.cpp): Qwen exports rotate halves (NeoX), Llama exports adjacent pairs.
  c.rope_layout = (p.architecture == "qwen2" || p.architecture == "qwen3") ? RopeLayout::NeoX
                                                                             : RopeLayout::Interleaved;
  c.tied_output = p.tied_output;
  return c;
}

}  // namespace tessera
