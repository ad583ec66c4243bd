// Hugging Face folder -> in-memory GGUF file: tensor names, shapes checked against config.json, the q/k row
// permutation, rope_freqs, and the metadata keys.
#include "model/hf_model.h"

#include <fmt/ranges.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/json_file.h"
#include "core/printable.h"
#include "formats/safetensors.h"
#include "formats/sampling_defaults.h"
#include "tokenizer/vocab_gguf.h"
#include "model/hf_config.h"
#include "tokenizer/hf_tokenizer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using gguf::Value;

// What the in-memory file's tensors point into.
struct Storage {
  std::shared_ptr<SafetensorsFolder> weights;
  std::vector<std::vector<uint8_t>> owned;  // permuted q/k, realigned tensors, rope_freqs
};

struct ExpectedTensor {
  std::string hf_name;
  std::string gguf_name;
  std::vector<uint64_t> shape;  // Hugging Face order: [out, in] for a matrix
  int64_t permute_heads = 0;    // > 0: rows are heads of head_dim to reorder (Llama/Mistral q and k)
  bool required = true;
};

// Every tensor a model with this config has, in the order llama.cpp writes them.
std::vector<ExpectedTensor> expected_tensors(const HfConfig& c) {
  const auto e = uint64_t(c.n_embd), q = uint64_t(c.n_head * c.head_dim), kv = uint64_t(c.n_head_kv * c.head_dim);
  const auto ff = uint64_t(c.n_ff), hd = uint64_t(c.head_dim);
  const int64_t q_heads = c.permute_qk ? c.n_head : 0, k_heads = c.permute_qk ? c.n_head_kv : 0;
  std::vector<ExpectedTensor> t;
  t.push_back({"model.embed_tokens.weight", "token_embd.weight", {uint64_t(c.n_vocab), e}});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    t.push_back({hf + "input_layernorm.weight", g + "attn_norm.weight", {e}});
    t.push_back({hf + "self_attn.q_proj.weight", g + "attn_q.weight", {q, e}, q_heads});
    if (c.qkv_bias) t.push_back({hf + "self_attn.q_proj.bias", g + "attn_q.bias", {q}, q_heads});
    t.push_back({hf + "self_attn.k_proj.weight", g + "attn_k.weight", {kv, e}, k_heads});
    if (c.qkv_bias) t.push_back({hf + "self_attn.k_proj.bias", g + "attn_k.bias", {kv}, k_heads});
    t.push_back({hf + "self_attn.v_proj.weight", g + "attn_v.weight", {kv, e}});
    if (c.qkv_bias) t.push_back({hf + "self_attn.v_proj.bias", g + "attn_v.bias", {kv}});
    t.push_back({hf + "self_attn.o_proj.weight", g + "attn_output.weight", {e, q}});
    if (c.qk_norm) {
      t.push_back({hf + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {hd}});
      t.push_back({hf + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {hd}});
    }
    t.push_back({hf + "post_attention_layernorm.weight", g + "ffn_norm.weight", {e}});
    t.push_back({hf + "mlp.gate_proj.weight", g + "ffn_gate.weight", {ff, e}});
    t.push_back({hf + "mlp.up_proj.weight", g + "ffn_up.weight", {ff, e}});
    t.push_back({hf + "mlp.down_proj.weight", g + "ffn_down.weight", {e, ff}});
  }
  t.push_back({"model.norm.weight", "output_norm.weight", {e}});
  // A tied checkpoint may still carry lm_head.weight (a copy of the embedding); it is then left out.
  t.push_back({"lm_head.weight", "output.weight", {uint64_t(c.n_vocab), e}, 0, !c.tied});
  return t;
}

std::string shape_text(const std::vector<uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// HF stores each head's rows as [first halves of the pairs..., second halves...] (rotate_half); GGUF "llama"
// wants pair members adjacent: GGUF row 2j = HF row j, GGUF row 2j+1 = HF row j + head_dim/2, per head.
void permute_head_rows(const uint8_t* src, uint8_t* dst, int64_t n_heads, int64_t head_dim, uint64_t row_bytes) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    const uint64_t base = uint64_t(h * head_dim);
    for (int64_t j = 0; j < half; ++j) {
      std::memcpy(dst + (base + 2 * j) * row_bytes, src + (base + j) * row_bytes, row_bytes);
      std::memcpy(dst + (base + 2 * j + 1) * row_bytes, src + (base + half + j) * row_bytes, row_bytes);
    }
  }
}

gguf::Metadata model_metadata(const HfConfig& c, const std::string& name) {
  const std::string a = c.arch + ".";
  gguf::Metadata m;
  m.emplace_back("general.architecture", Value::make_string(c.arch));
  m.emplace_back("general.name", Value::make_string(name));
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.n_vocab},          {"context_length", c.n_ctx},
      {"embedding_length", c.n_embd},     {"block_count", c.n_layer},
      {"feed_forward_length", c.n_ff},    {"rope.dimension_count", c.head_dim},
      {"attention.head_count", c.n_head}, {"attention.head_count_kv", c.n_head_kv},
      {"attention.key_length", c.head_dim}, {"attention.value_length", c.head_dim},
  };
  for (const auto& [key, value] : sizes) m.emplace_back(a + key, Value::make_u32(uint32_t(value)));
  m.emplace_back(a + "rope.freq_base", Value::make_f32(float(c.rope_theta)));
  m.emplace_back(a + "attention.layer_norm_rms_epsilon", Value::make_f32(float(c.rms_eps)));
  if (c.rope_scaling == HfRopeScaling::Linear) {
    m.emplace_back(a + "rope.scaling.type", Value::make_string("linear"));
    m.emplace_back(a + "rope.scaling.factor", Value::make_f32(float(c.rope_linear_factor)));
  }
  if (c.sliding_window > 0) m.emplace_back(a + "attention.sliding_window", Value::make_u32(uint32_t(c.sliding_window)));
  return m;
}

}  // namespace

HfFolder open_hf_folder(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path)) fail("{}: not a Hugging Face model folder (no config.json)", dir);
  const HfConfig c = read_hf_config(config_path.string());
  HfFolder out;
  out.notes.push_back(fmt::format("config: {} ({} -> GGUF architecture {}{}{})", config_path.string(),
                                  c.hf_architecture, c.arch, c.torch_dtype.empty() ? "" : ", torch_dtype ",
                                  c.torch_dtype));

  auto storage = std::make_shared<Storage>();
  storage->weights = SafetensorsFolder::open(dir);
  const SafetensorsFolder& weights = *storage->weights;

  std::map<std::string, const ExpectedTensor*> by_name;
  const std::vector<ExpectedTensor> expected = expected_tensors(c);
  for (const ExpectedTensor& e : expected) by_name[e.hf_name] = &e;
  std::map<std::string, uint64_t> dtype_counts;
  for (const SafetensorsTensor* t : weights.tensors()) {
    dtype_counts[std::string(tensor_type_name(t->type))]++;
    if (t->name.ends_with(".rotary_emb.inv_freq")) continue;  // a buffer older exports saved; recomputed from theta
    if (!by_name.count(t->name)) {
      fail("{}: unexpected tensor '{}' for a {} with this config.json", weights.shard_name(*t), printable(t->name),
           c.hf_architecture);
    }
  }
  std::string dtypes;
  for (const auto& [type, n] : dtype_counts) dtypes += fmt::format("{}{} {}", dtypes.empty() ? "" : ", ", type, n);
  out.notes.push_back(fmt::format("weights: {} safetensors file{}, {} tensors ({})", weights.shards().size(),
                                  weights.shards().size() == 1 ? "" : "s", weights.tensors().size(), dtypes));

  std::vector<gguf::TensorInfo> tensors;
  uint64_t permuted_bytes = 0;
  if (c.rope_scaling == HfRopeScaling::Llama3) {
    const std::vector<float> factors = llama3_rope_factors(c.head_dim, c.rope_theta, c.llama3);
    auto& bytes = storage->owned.emplace_back(factors.size() * sizeof(float));
    std::memcpy(bytes.data(), factors.data(), bytes.size());
    tensors.push_back({"rope_freqs.weight", {uint64_t(factors.size())}, TensorType::F32, 0, 0, 0, bytes.data()});
    out.notes.push_back(fmt::format("rope scaling: llama3 (factor {}, low_freq_factor {}, high_freq_factor {}, "
                                    "original context {}) as rope_freqs.weight",
                                    c.llama3.factor, c.llama3.low_freq_factor, c.llama3.high_freq_factor,
                                    c.llama3.original_context));
  } else if (c.rope_scaling == HfRopeScaling::Linear) {
    out.notes.push_back(fmt::format("rope scaling: linear, factor {}", c.rope_linear_factor));
  }
  for (const ExpectedTensor& e : expected) {
    const SafetensorsTensor* t = weights.find(e.hf_name);
    if (t == nullptr) {
      if (!e.required) continue;
      fail("{}: missing tensor '{}' (a {} with {} layers has it)", dir, e.hf_name, c.hf_architecture, c.n_layer);
    }
    if (!e.required) continue;  // lm_head.weight of a tied model
    if (t->shape != e.shape) {
      fail("{}: tensor '{}' has shape {} but config.json implies {}", weights.shard_name(*t), e.hf_name,
           shape_text(t->shape), shape_text(e.shape));
    }
    gguf::TensorInfo info;
    info.name = e.gguf_name;
    info.dims.assign(e.shape.rbegin(), e.shape.rend());  // GGUF lists the contiguous dimension first
    info.type = t->type;
    info.data = t->data;
    const uint64_t element_bytes = tensor_row_bytes(t->type, 1);
    if (e.permute_heads > 0) {
      auto& bytes = storage->owned.emplace_back(t->n_bytes);
      permute_head_rows(t->data, bytes.data(), e.permute_heads, c.head_dim, t->n_bytes / e.shape[0]);
      info.data = bytes.data();
      permuted_bytes += t->n_bytes;
    } else if (reinterpret_cast<uintptr_t>(t->data) % element_bytes != 0) {
      // Only when a writer did not pad the header to 8 bytes, as the format recommends; kernels read typed
      // elements, so these few tensors get an aligned copy.
      auto& bytes = storage->owned.emplace_back(t->data, t->data + t->n_bytes);
      info.data = bytes.data();
    }
    tensors.push_back(std::move(info));
  }
  if (permuted_bytes > 0) {
    out.notes.push_back(fmt::format("q/k rows permuted from rotate-half to GGUF's adjacent-pair RoPE order ({:.1f} "
                                    "MiB copied)",
                                    double(permuted_bytes) / double(1 << 20)));
  }
  if (c.sliding_window > 0) {
    out.notes.push_back(fmt::format("sliding window {} < max_position_embeddings {}: context limited to {}",
                                    c.sliding_window, c.max_positions, c.n_ctx));
  }

  HfTokenizer tok = load_hf_tokenizer(dir);
  out.notes.insert(out.notes.end(), tok.notes.begin(), tok.notes.end());
  if (int64_t(tok.vocab.tokens.size()) > c.n_vocab) {
    fail("{}: the tokenizer has {} tokens but config.json's vocab_size is {}", dir, tok.vocab.tokens.size(), c.n_vocab);
  }
  if (int64_t(tok.vocab.tokens.size()) < c.n_vocab) {
    out.notes.push_back(fmt::format("vocabulary padded from {} to vocab_size {} with unused tokens",
                                    tok.vocab.tokens.size(), c.n_vocab));
    pad_vocab(tok.vocab, c.n_vocab);
  }

  fs::path folder_name = fs::absolute(dir).lexically_normal();
  if (folder_name.filename().empty()) folder_name = folder_name.parent_path();  // "dir/"
  gguf::Metadata metadata = model_metadata(c, folder_name.filename().string());
  for (auto& kv : vocab_metadata(tok.vocab)) metadata.push_back(std::move(kv));
  const fs::path generation_config = fs::path(dir) / "generation_config.json";
  if (fs::exists(generation_config)) {
    const SamplingDefaults sampling =
        sampling_defaults_from_generation_config(read_json_file(generation_config.string()), generation_config.string());
    if (!sampling.empty()) out.notes.push_back("sampling defaults (generation_config.json): " + sampling.describe());
    for (auto& kv : sampling_metadata(sampling)) metadata.push_back(std::move(kv));
  }
  // The kernels' layouts are written in place (Model::apply): into the shards' private mappings, or into the
  // copies this folder owns.
  const Storage* held = storage.get();
  auto rewriter = [held](const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn) {
    for (const auto& bytes : held->owned) {
      if (p >= bytes.data() && n <= bytes.size() && size_t(p - bytes.data()) <= bytes.size() - n) {
        fn(const_cast<uint8_t*>(p));
        return true;
      }
    }
    return held->weights->rewrite_private(p, n, fn);
  };
  out.file = gguf::File::from_parts(dir, std::move(metadata), std::move(tensors), std::move(storage), rewriter);
  return out;
}

std::shared_ptr<gguf::File> open_model_file(const std::string& path) {
  if (fs::is_directory(path)) return open_hf_folder(path).file;
  return gguf::File::open(path);
}

}  // namespace tessera
