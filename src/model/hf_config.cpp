// config.json -> HfConfig. Defaults are the transformers library's for each field, so a config that leaves a
// field out means what it means there.
#include "model/hf_config.h"

#include <optional>

#include "core/error.h"
#include "core/json_file.h"
#include "core/printable.h"

namespace tessera {
namespace {

using nlohmann::json;

struct ArchInfo {
  std::string_view hf;
  std::string_view gguf;
  bool permute_qk, always_bias, qk_norm;
};
// Mistral is a Llama with a sliding window; llama.cpp writes it as "llama" too.
constexpr ArchInfo kArchitectures[] = {
    {"LlamaForCausalLM", "llama", true, false, false},
    {"MistralForCausalLM", "llama", true, false, false},
    {"Qwen2ForCausalLM", "qwen2", false, true, false},
    {"Qwen3ForCausalLM", "qwen3", false, false, true},
};

class Fields {
 public:
  Fields(const json& root, const std::string& path) : root_(root), path_(path) {}

  bool has(const char* key) const { return root_.contains(key) && !root_[key].is_null(); }

  int64_t integer(const char* key, int64_t limit, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail("{}: missing '{}'", path_, key);
    }
    const json& v = root_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > limit) {
      fail("{}: '{}' = {} is not an integer in 1..{}", path_, key, printable(v.dump()), limit);
    }
    return v.get<int64_t>();
  }

  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = root_[key];
    if (!v.is_number() || !(v.get<double>() > 0.0)) fail("{}: '{}' = {} is not a positive number", path_, key, printable(v.dump()));
    return v.get<double>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!root_[key].is_boolean()) fail("{}: '{}' is not true or false", path_, key);
    return root_[key].get<bool>();
  }

  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!root_[key].is_string()) fail("{}: '{}' is not a string", path_, key);
    return root_[key].get<std::string>();
  }

 private:
  const json& root_;
  const std::string& path_;
};

void read_rope_scaling(const json& root, const std::string& path, HfConfig& c) {
  if (!root.contains("rope_scaling") || root["rope_scaling"].is_null()) return;
  const json& rs = root["rope_scaling"];
  if (!rs.is_object()) fail("{}: rope_scaling is not an object", path);
  const Fields f(rs, path);
  // transformers renamed "type" to "rope_type"; both appear in published configs.
  const std::string type = f.string("rope_type", f.string("type", "default"));
  if (type == "default") return;
  if (type == "linear") {
    c.rope_scaling = HfRopeScaling::Linear;
    c.rope_linear_factor = f.number("factor", 0.0);
    if (!(c.rope_linear_factor > 0.0)) fail("{}: rope_scaling 'linear' needs a positive factor", path);
    return;
  }
  if (type == "llama3") {
    c.rope_scaling = HfRopeScaling::Llama3;
    if (!f.has("factor") || !f.has("original_max_position_embeddings")) {
      fail("{}: rope_scaling 'llama3' needs factor and original_max_position_embeddings", path);
    }
    c.llama3.factor = f.number("factor", 0.0);
    c.llama3.low_freq_factor = f.number("low_freq_factor", 1.0);
    c.llama3.high_freq_factor = f.number("high_freq_factor", 4.0);
    c.llama3.original_context = f.integer("original_max_position_embeddings", 1 << 24);
    if (!(c.llama3.high_freq_factor > c.llama3.low_freq_factor)) {
      fail("{}: rope_scaling 'llama3' needs high_freq_factor > low_freq_factor", path);
    }
    return;
  }
  fail("{}: rope_scaling type '{}' is not supported (supported: llama3, linear)", path, printable(type));
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  const json root = read_json_file(path);
  if (!root.is_object()) fail("{}: not a JSON object", path);
  HfConfig c;
  if (!root.contains("architectures") || !root["architectures"].is_array() || root["architectures"].empty() ||
      !root["architectures"][0].is_string()) {
    fail("{}: no 'architectures' list naming the model class", path);
  }
  c.hf_architecture = root["architectures"][0].get<std::string>();
  const ArchInfo* arch = nullptr;
  for (const ArchInfo& a : kArchitectures) {
    if (a.hf == c.hf_architecture) arch = &a;
  }
  if (arch == nullptr) {
    fail("{}: unsupported architecture '{}' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
         "Qwen3ForCausalLM)",
         path, printable(c.hf_architecture));
  }
  c.arch = std::string(arch->gguf);
  c.permute_qk = arch->permute_qk;
  c.qk_norm = arch->qk_norm;

  const Fields f(root, path);
  c.n_embd = f.integer("hidden_size", 1 << 20);
  c.n_layer = f.integer("num_hidden_layers", 4096);
  c.n_head = f.integer("num_attention_heads", 1 << 16);
  c.n_head_kv = f.integer("num_key_value_heads", 1 << 16, c.n_head);
  if (!f.has("head_dim") && c.n_embd % c.n_head != 0) {
    fail("{}: hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim)", path, c.n_embd, c.n_head);
  }
  c.head_dim = f.integer("head_dim", 1 << 16, c.n_embd / c.n_head);
  c.n_ff = f.integer("intermediate_size", 1 << 22);
  c.n_vocab = f.integer("vocab_size", 1 << 24);
  c.max_positions = f.integer("max_position_embeddings", 1 << 24);
  c.rms_eps = f.number("rms_norm_eps", 1e-6);
  c.rope_theta = f.number("rope_theta", 10000.0);
  c.tied = f.boolean("tie_word_embeddings", false);
  c.qkv_bias = arch->always_bias || f.boolean("attention_bias", false);
  c.torch_dtype = f.string("torch_dtype", f.string("dtype", ""));
  if (c.n_head % c.n_head_kv != 0) {
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", path, c.n_head, c.n_head_kv);
  }
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} is odd; RoPE rotates pairs", path, c.head_dim);
  if (const std::string act = f.string("hidden_act", "silu"); act != "silu") {
    fail("{}: hidden_act '{}' is not supported (only silu)", path, printable(act));
  }
  if (f.boolean("mlp_bias", false)) fail("{}: mlp_bias is not supported", path);
  read_rope_scaling(root, path, c);

  // Tessera attends over the whole context. A sliding window smaller than the context would change the result
  // past the window, so the usable context stops at the window instead (and the engine refuses more).
  c.n_ctx = c.max_positions;
  if (c.arch == "qwen2" || c.arch == "qwen3") {
    if (f.boolean("use_sliding_window", false)) fail("{}: use_sliding_window is not supported", path);
  } else if (f.has("sliding_window")) {
    const int64_t window = f.integer("sliding_window", 1 << 24);
    if (window < c.max_positions) {
      c.sliding_window = window;
      c.n_ctx = window;
    }
  }
  return c;
}

}  // namespace tessera
