// Model loading: reads hyper-parameters from GGUF metadata and binds weight tensors by their GGUF names,
// checking every shape and type so that a bad file fails here with a clear message, not in a kernel.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/huge_pages.h"
#include "core/memory_info.h"
#include "kernels/int8_outliers.h"
#include "kernels/interleave.h"
#include "kernels/lowbit.h"
#include "kernels/quant.h"
#include "model/embedded_model.h"
#include "model/hf_model.h"

namespace tessera {
namespace {

RopeLayout rope_layout_for(const std::string& arch) {
  // llama.cpp's convention: Llama-style exports rotate adjacent pairs, GPT-NeoX-style (Qwen) rotate halves.
  if (arch == "qwen2" || arch == "qwen3") return RopeLayout::NeoX;
  return RopeLayout::Interleaved;
}

bool is_supported_architecture(const std::string& arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3";
}

// Linear scaling divides every frequency by the factor (positions are compressed); "llama3" scaling comes as
// the rope_freqs.weight tensor instead. YaRN and LongRoPE change more than the frequencies and are refused.
float rope_freq_scale(const gguf::File& file, const std::string& a) {
  const std::string type = file.find_string(a + "rope.scaling.type").value_or("none");
  double factor = 1.0;
  if (type == "linear") {
    factor = file.find_float(a + "rope.scaling.factor").value_or(1.0);
  } else if (type != "none") {
    fail("{}: RoPE scaling type '{}' is not supported (supported: none, linear, and llama3 as rope_freqs.weight)",
         file.name(), type);
  }
  if (auto legacy = file.find_float(a + "rope.scale_linear")) factor = *legacy;  // older files' spelling
  if (!(factor > 0.0)) fail("{}: RoPE scaling factor {} is not positive", file.name(), factor);
  return static_cast<float>(1.0 / factor);
}

ModelConfig read_config(const gguf::File& file) {
  ModelConfig c;
  c.architecture = file.get_string("general.architecture");
  if (!is_supported_architecture(c.architecture)) {
    fail("{}: unsupported architecture '{}' (supported: llama, mistral, qwen2, qwen3)", file.name(), c.architecture);
  }
  const std::string a = c.architecture + ".";
  auto require_positive = [&](const std::string& key, uint64_t limit) -> int64_t {
    const uint64_t v = file.get_uint(key);
    if (v == 0 || v > limit) fail("{}: metadata '{}' = {} is out of range (1..{})", file.name(), key, v, limit);
    return static_cast<int64_t>(v);
  };
  c.n_embd = require_positive(a + "embedding_length", 1 << 20);
  c.n_layer = require_positive(a + "block_count", 4096);
  c.n_ff = require_positive(a + "feed_forward_length", 1 << 22);
  c.n_head = require_positive(a + "attention.head_count", 1 << 16);
  c.n_head_kv = file.find(a + "attention.head_count_kv") ? require_positive(a + "attention.head_count_kv", 1 << 16)
                                                          : c.n_head;
  c.n_ctx_train = require_positive(a + "context_length", 1 << 24);
  if (file.find(a + "attention.key_length")) {
    c.head_dim = require_positive(a + "attention.key_length", 1 << 16);
  } else {
    if (c.n_embd % c.n_head != 0) fail("{}: embedding_length is not a multiple of head_count", file.name());
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.n_head % c.n_head_kv != 0) {
    fail("{}: head_count {} is not a multiple of head_count_kv {}", file.name(), c.n_head, c.n_head_kv);
  }
  if (c.head_dim % 2 != 0) fail("{}: head dimension {} is odd; RoPE needs pairs", file.name(), c.head_dim);
  if (auto rope_dims = file.find_uint(a + "rope.dimension_count"); rope_dims && *rope_dims != uint64_t(c.head_dim)) {
    fail("{}: partial RoPE ({} of {} dimensions) is not supported", file.name(), *rope_dims, c.head_dim);
  }
  c.rms_eps = static_cast<float>(file.find_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_theta = static_cast<float>(file.find_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rms_eps > 0.0f) || !(c.rope_theta > 0.0f)) fail("{}: invalid rms epsilon or rope theta", file.name());
  c.rope_freq_scale = rope_freq_scale(file, a);
  if (file.find(a + "attention.sliding_window")) {
    c.sliding_window = require_positive(a + "attention.sliding_window", 1 << 24);
  }
  c.rope_layout = rope_layout_for(c.architecture);
  return c;
}

class Binder {
 public:
  Binder(const gguf::File& file, std::vector<std::vector<float>>& owned) : file_(file), owned_(owned) {}

  const gguf::TensorInfo& tensor(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) fail("{}: missing tensor '{}'", file_.name(), name);
    return *t;
  }

  // A matrix with `n_in` columns (GGUF dims[0]) and `n_out` rows.
  WeightMatrix matrix(const std::string& name, int64_t n_out, int64_t n_in) const {
    const gguf::TensorInfo& t = tensor(name);
    if (auto format = file_.find_string("tessera.quant." + name + ".format")) {
      return lowbit_matrix(t, *format, n_out, n_in);
    }
    if (t.dims.size() != 2 || t.dims[0] != uint64_t(n_in) || t.dims[1] != uint64_t(n_out)) {
      fail("{}: tensor '{}' has shape {} but [{}, {}] was expected", file_.name(), name, shape(t), n_in, n_out);
    }
    if (!is_supported_weight_type(t.type)) {
      fail("{}: tensor '{}' has type {}, which Tessera cannot compute with", file_.name(), name,
           tensor_type_name(t.type));
    }
    WeightMatrix w;
    w.type = t.type;
    w.n_out = n_out;
    w.n_in = n_in;
    w.data = t.data;
    w.row_bytes = t.n_bytes / uint64_t(n_out);
    if (t.type == TensorType::I8) w.row_scales = vector(name + ".scale", n_out);  // Tessera INT8 scales
    return w;
  }

  // Tessera's FP8 and INT4 formats: raw bytes in an I8 tensor plus companion tensors (see kernels/lowbit.h).
  WeightMatrix lowbit_matrix(const gguf::TensorInfo& t, const std::string& format, int64_t n_out,
                             int64_t n_in) const {
    const std::string& name = t.name;
    WeightMatrix w;
    w.n_out = n_out;
    w.n_in = n_in;
    w.data = t.data;
    uint64_t row_bytes = 0;
    if (format == "fp8_e4m3") {
      w.type = TensorType::FP8_E4M3;
      row_bytes = uint64_t(n_in);
      w.row_scales = vector(name + ".scale", n_out);
    } else if (format == "int4") {
      w.type = TensorType::INT4;
      const uint64_t group = file_.find_uint("tessera.quant." + name + ".group_size").value_or(0);
      if (!is_valid_int4_group(int64_t(group))) {
        fail("{}: tensor '{}': INT4 group size {} is not a positive multiple of 32", file_.name(), name, group);
      }
      w.group_size = int32_t(group);
      row_bytes = int4_row_bytes(n_in);
      w.group_scales = half_matrix(name + ".scale", n_out, w.n_groups());
      w.group_zeros = half_matrix(name + ".zero", n_out, w.n_groups());
    } else {
      fail("{}: tensor '{}' has unknown Tessera quantization format '{}'", file_.name(), name, format);
    }
    if (t.type != TensorType::I8 || t.dims.size() != 2 || t.dims[0] != row_bytes || t.dims[1] != uint64_t(n_out)) {
      fail("{}: {} tensor '{}' must be I8 [{}, {}], not {} {}", file_.name(), format, name, row_bytes, n_out,
           tensor_type_name(t.type), shape(t));
    }
    w.row_bytes = row_bytes;
    return w;
  }

  const uint16_t* half_matrix(const std::string& name, int64_t n_rows, int64_t n_cols) const {
    const gguf::TensorInfo& t = tensor(name);
    if (t.type != TensorType::F16 || t.dims.size() != 2 || t.dims[0] != uint64_t(n_cols) ||
        t.dims[1] != uint64_t(n_rows) || reinterpret_cast<uintptr_t>(t.data) % 2 != 0) {
      fail("{}: tensor '{}' must be F16 [{}, {}], not {} {}", file_.name(), name, n_cols, n_rows,
           tensor_type_name(t.type), shape(t));
    }
    return reinterpret_cast<const uint16_t*>(t.data);
  }

  // A 1-D fp32 vector; F16/BF16 storage is widened once at load.
  const float* vector(const std::string& name, int64_t n) const {
    const gguf::TensorInfo& t = tensor(name);
    if (t.n_elements != uint64_t(n) || t.dims.size() > 2) {
      fail("{}: tensor '{}' has shape {} but [{}] was expected", file_.name(), name, shape(t), n);
    }
    if (t.type == TensorType::F32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
      return reinterpret_cast<const float*>(t.data);
    }
    if (t.type != TensorType::F32 && t.type != TensorType::F16 && t.type != TensorType::BF16) {
      fail("{}: tensor '{}' must be F32, F16 or BF16, not {}", file_.name(), name, tensor_type_name(t.type));
    }
    owned_.emplace_back(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, owned_.back().data(), n);
    return owned_.back().data();
  }

  const float* optional_vector(const std::string& name, int64_t n) const {
    return file_.find_tensor(name) ? vector(name, n) : nullptr;
  }

 private:
  static std::string shape(const gguf::TensorInfo& t) {
    std::string s = "[";
    for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
    return s + "]";
  }

  const gguf::File& file_;
  std::vector<std::vector<float>>& owned_;
};

}  // namespace

std::shared_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  check_int8_threshold(options.int8_threshold);  // before mapping a large file
  return from_gguf(open_model_file(path), options);
}

std::shared_ptr<Model> Model::load_embedded(const LoadOptions& options) {
  return from_gguf(gguf::File::from_memory(embedded_model_bytes(), kEmbeddedModelName), options);
}

std::shared_ptr<Model> Model::from_gguf(std::shared_ptr<gguf::File> file, const LoadOptions& options) {
  std::shared_ptr<Model> model(new Model());
  model->name_ = file->name();
  model->file_ = file;
  ModelConfig& c = model->config_;
  c = read_config(*file);

  Binder bind(*file, model->owned_floats_);
  const gguf::TensorInfo& embd = bind.tensor("token_embd.weight");
  // Tessera's INT4 stores rows as packed bytes (kernels/lowbit.h): dims[0] is the row's byte count.
  const bool int4_embd = file->find_string("tessera.quant.token_embd.weight.format").value_or("") == "int4";
  const uint64_t embd_row = int4_embd ? int4_row_bytes(c.n_embd) : uint64_t(c.n_embd);
  if (embd.dims.size() != 2 || embd.dims[0] != embd_row) {
    fail("{}: tensor 'token_embd.weight' must be [{}, n_vocab]", file->name(), embd_row);
  }
  c.n_vocab = static_cast<int64_t>(embd.dims[1]);

  ModelWeights& w = model->weights_;
  w.token_embd = bind.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = bind.vector("output_norm.weight", c.n_embd);
  c.tied_output = file->find_tensor("output.weight") == nullptr;
  w.output = c.tied_output ? w.token_embd : bind.matrix("output.weight", c.n_vocab, c.n_embd);
  w.rope_freqs = bind.optional_vector("rope_freqs.weight", c.head_dim / 2);
  for (int64_t i = 0; w.rope_freqs != nullptr && i < c.head_dim / 2; ++i) {
    if (!(w.rope_freqs[i] > 0.0f) || !std::isfinite(w.rope_freqs[i])) {
      fail("{}: rope_freqs.weight[{}] = {} is not a positive frequency divisor", file->name(), i, w.rope_freqs[i]);
    }
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights layer;
    layer.attn_norm = bind.vector(p + "attn_norm.weight", c.n_embd);
    layer.wq = bind.matrix(p + "attn_q.weight", c.q_dim(), c.n_embd);
    layer.wk = bind.matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd);
    layer.wv = bind.matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd);
    layer.wo = bind.matrix(p + "attn_output.weight", c.n_embd, c.q_dim());
    layer.bq = bind.optional_vector(p + "attn_q.bias", c.q_dim());
    layer.bk = bind.optional_vector(p + "attn_k.bias", c.kv_dim());
    layer.bv = bind.optional_vector(p + "attn_v.bias", c.kv_dim());
    layer.q_norm = bind.optional_vector(p + "attn_q_norm.weight", c.head_dim);
    layer.k_norm = bind.optional_vector(p + "attn_k_norm.weight", c.head_dim);
    layer.ffn_norm = bind.vector(p + "ffn_norm.weight", c.n_embd);
    layer.w_gate = bind.matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    layer.w_up = bind.matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    layer.w_down = bind.matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
    w.layers.push_back(layer);
  }

  model->tokenizer_ = make_tokenizer(vocab_from_gguf(*file));
  model->sampling_defaults_ = sampling_defaults_of(*file);
  if (model->tokenizer_->n_vocab() > c.n_vocab) {
    fail("{}: tokenizer has {} tokens but the embedding only {} rows", file->name(), model->tokenizer_->n_vocab(),
         c.n_vocab);
  }
  model->apply(options);
  return model;
}

std::shared_ptr<Model> Model::from_parts(ModelConfig config, ModelWeights weights,
                                         std::shared_ptr<const Tokenizer> tokenizer,
                                         std::shared_ptr<const void> storage, const LoadOptions& options) {
  std::shared_ptr<Model> model(new Model());
  model->name_ = "in-memory model";
  model->config_ = std::move(config);
  model->weights_ = std::move(weights);
  model->tokenizer_ = std::move(tokenizer);
  model->storage_ = std::move(storage);
  model->apply(options);
  return model;
}

namespace {

// Every matrix the forward pass multiplies with (the embedding is only looked up, unless tied to the output).
template <typename Weights, typename F>
void for_each_linear(Weights& w, F&& f) {
  f(w.output);
  for (auto& l : w.layers)
    for (auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) f(*m);
}

// Whether interleave_weights rewrites m: every matrix can_interleave takes, but float matrices (panels) only
// when `floats` allows.
bool rewrites(const WeightMatrix& m, bool floats) {
  return can_interleave(m) && (floats || interleaved_layout(m.type) != WeightLayout::Panel32);
}

// The bytes of the matrices the forward pass streams (all of them, or only those interleave_weights rewrites),
// in address order, merged where less than a huge page apart. Only whole 2 MiB pages inside a range can move to
// huge pages; merged, the pages that straddle two matrices (and the norms between them) move too, not just each
// matrix's interior.
std::vector<std::pair<const uint8_t*, const uint8_t*>> streamed_spans(const ModelWeights& w, bool only_rewritten,
                                                                       bool floats) {
  std::vector<std::pair<const uint8_t*, const uint8_t*>> spans;
  for_each_linear(w, [&](const WeightMatrix& m) {
    if (!only_rewritten || rewrites(m, floats)) spans.emplace_back(m.data, m.data + size_t(m.n_out) * m.row_bytes);
  });
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<const uint8_t*, const uint8_t*>> merged;
  for (const auto& span : spans) {
    if (!merged.empty() && span.first < merged.back().second + kHugePageBytes) {
      merged.back().second = std::max(merged.back().second, span.second);  // also a second view (tied output)
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

// Whether the streamed matrices may all become this process's own memory: while they fit in half the memory
// available. A model larger than memory (read from disk every token) or one shared by several processes through
// the page cache cannot afford it.
bool streamed_weights_may_be_private(const ModelWeights& w) {
  uint64_t streamed = 0;
  for (const auto& [begin, end] : streamed_spans(w, false, true)) streamed += uint64_t(end - begin);
  const uint64_t available = available_memory_bytes();
  return available != 0 && streamed <= available / 2;
}

// Moves the streamed matrices of a mapped file to huge pages (MappedFile::use_huge_pages). Rewritten matrices
// become private pages anyway, so theirs always move; the others (and the float matrices, which are then left in
// rows) move only when all may be private.
void move_streamed_weights_to_huge_pages(const ModelWeights& w, gguf::File& file, bool all_private) {
  for (const auto& [begin, end] : streamed_spans(w, !all_private, false)) file.use_huge_pages(begin, size_t(end - begin));
}

// Rewrites the bytes of each linear matrix that `wants` once, through `rewrite` with edit(m, bytes), and calls
// mark(view) on every view of rewritten bytes: the matrix, a second view sharing its bytes, and a token embedding
// tied to one of them.
template <typename Wants, typename Edit, typename Mark>
void rewrite_linear_once(ModelWeights& w, const WeightRewriter& rewrite, Wants&& wants, Edit&& edit, Mark&& mark) {
  std::unordered_set<const uint8_t*> done;
  for_each_linear(w, [&](WeightMatrix& m) {
    if (done.count(m.data) == 0) {
      if (!wants(m)) return;
      if (!rewrite(m.data, size_t(m.n_out) * m.row_bytes, [&](uint8_t* p) { edit(m, p); })) return;
      done.insert(m.data);
    }
    mark(m);
  });
  if (done.count(w.token_embd.data) != 0) mark(w.token_embd);
}

}  // namespace

void interleave_weights(ModelWeights& w, const WeightRewriter& rewrite, bool floats) {
  rewrite_linear_once(
      w, rewrite, [&](const WeightMatrix& m) { return rewrites(m, floats); },
      [](const WeightMatrix& m, uint8_t* p) { interleave_rows(m.type, p, m.n_out, m.n_in); },
      [](WeightMatrix& m) { m.layout = interleaved_layout(m.type); });
}

void round_f16_panels_to_bf16(ModelWeights& w, const WeightRewriter& rewrite) {
  if (active_isa() < Isa::Avx512Bf16) return;  // no bf16 products to round them for
  rewrite_linear_once(
      w, rewrite,
      [](const WeightMatrix& m) { return m.type == TensorType::F16 && m.layout == WeightLayout::Panel32; },
      [](const WeightMatrix& m, uint8_t* p) { round_f16_to_bf16(p, size_t(m.n_out) * size_t(m.n_in)); },
      [](WeightMatrix& m) { m.type = TensorType::BF16; });
}

void pair_bf16_product_panels(ModelWeights& w, const WeightRewriter& rewrite) {
  if (active_isa() < Isa::Avx512Bf16) return;  // the fp32 path, which reads slices faster
  rewrite_linear_once(
      w, rewrite,
      [](const WeightMatrix& m) { return m.type == TensorType::BF16 && m.layout == WeightLayout::Panel32; },
      [](const WeightMatrix& m, uint8_t* p) { pair_bf16_panels(p, m.n_out, m.n_in); },
      [](WeightMatrix& m) { m.bf16_products = true; });
}

void Model::apply(const LoadOptions& options) {
  check_int8_threshold(options.int8_threshold);
  if (options.interleave_rows && file_ != nullptr) {
    const bool all_private = streamed_weights_may_be_private(weights_);
    move_streamed_weights_to_huge_pages(weights_, *file_, all_private);
    const WeightRewriter rewrite = [&](const uint8_t* data, size_t n, const std::function<void(uint8_t*)>& fn) {
      return file_->rewrite_private(data, n, fn);
    };
    interleave_weights(weights_, rewrite, all_private);
    if (options.bf16_products == Bf16Products::Bf16AndF16Weights) round_f16_panels_to_bf16(weights_, rewrite);
    if (options.bf16_products != Bf16Products::Off) pair_bf16_product_panels(weights_, rewrite);
  }
  for_each_linear(weights_, [&](WeightMatrix& m) {
    if (m.type == TensorType::I8) m.outlier_threshold = options.int8_threshold;
  });
}

int64_t Model::n_bf16_product_matrices() const {
  int64_t n = 0;
  for_each_linear(weights_, [&](const WeightMatrix& m) { n += m.bf16_products; });
  return n;
}

bool Model::takes_bf16_products() const {
  return active_isa() >= Isa::Avx512Bf16 && n_bf16_product_matrices() > 0;
}

int64_t Model::n_int8_matrices() const {
  int64_t n = 0;
  for_each_linear(weights_, [&](const WeightMatrix& m) { n += m.type == TensorType::I8; });
  return n;
}

uint64_t Model::weight_bytes() const {
  auto bytes = [](const WeightMatrix& m) {  // rows plus their scales (and INT4 zero points)
    const uint64_t params = m.type == TensorType::INT4 ? uint64_t(m.n_groups()) * 4 : m.row_scales ? 4 : 0;
    return uint64_t(m.n_out) * (m.row_bytes + params);
  };
  uint64_t total = bytes(weights_.output);  // the embedding is read one row per token, not streamed
  for (const LayerWeights& l : weights_.layers) {
    total += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) + bytes(l.w_up) + bytes(l.w_down);
  }
  return total;
}

}  // namespace tessera
