// Synthetic models: the tensor plan, the counter-based random numbers, the GGUF writer glue and the in-memory
// variant.
#include "model/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/memory_info.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/vocab_gguf.h"
#include "kernels/lowbit.h"
#include "kernels/quant.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

// splitmix64's finalizer: a bijective mix good enough that consecutive counters look independent.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Fills `out` with approximately normal(0, stddev) values: the sum of the four 16-bit fields of one hash
// (Irwin-Hall, n = 4) has mean 2·65535 and standard deviation ≈ 65536·sqrt(4/12). One 64-bit hash per value
// keeps it fast and each value a pure function of (seed, row, column).
void normal_row(uint64_t row_seed, float stddev, float* out, int64_t n) {
  constexpr double kMean = 2.0 * 65535.0;
  const double scale = double(stddev) / (65536.0 * std::sqrt(4.0 / 12.0));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = mix64(row_seed + uint64_t(i) * 0x9e3779b97f4a7c15ULL);
    const uint64_t sum = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
    out[i] = float((double(sum) - kMean) * scale);
  }
}

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(1ULL << 30)); }

void fill_tensor(const SyntheticTensor& t, uint8_t* dst, const SyntheticRowParams& params, ThreadPool& pool) {
  if (t.n_rows == 1) {
    fill_synthetic_rows(t, 0, 1, dst, params);
    return;
  }
  // Chunks of rows rather than one contiguous range per thread: rows cost the same, but a pool thread that is
  // descheduled (shared machines) should not hold up the whole tensor.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(64, t.n_rows / (8 * pool.size()) + 1));
  const int64_t n_chunks = (t.n_rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t c = next.fetch_add(1); c < n_chunks; c = next.fetch_add(1)) {
      fill_synthetic_rows(t, c * chunk, std::min(t.n_rows, (c + 1) * chunk), dst, params);
    }
  });
}

void set_model_metadata(gguf::Writer& w, const ModelPreset& p) {
  const std::string a = std::string(p.architecture);
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("{} (synthetic random weights)", p.name));
  w.set_u32(a + ".context_length", uint32_t(p.n_ctx));
  w.set_u32(a + ".embedding_length", uint32_t(p.n_embd));
  w.set_u32(a + ".block_count", uint32_t(p.n_layer));
  w.set_u32(a + ".feed_forward_length", uint32_t(p.n_ff));
  w.set_u32(a + ".attention.head_count", uint32_t(p.n_head));
  w.set_u32(a + ".attention.head_count_kv", uint32_t(p.n_head_kv));
  w.set_u32(a + ".attention.key_length", uint32_t(p.head_dim));
  w.set_u32(a + ".attention.value_length", uint32_t(p.head_dim));
  w.set_u32(a + ".rope.dimension_count", uint32_t(p.head_dim));
  w.set_f32(a + ".rope.freq_base", p.rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_u32(a + ".vocab_size", uint32_t(p.n_vocab));
}

}  // namespace

uint64_t SyntheticPlan::n_bytes() const {
  uint64_t total = 0;
  for (const SyntheticTensor& t : tensors) {
    total += t.n_bytes() + t.side_bytes();
  }
  return total;
}

SyntheticPlan plan_synthetic_model(const ModelPreset& p, TensorType type, uint64_t seed, int64_t int4_group) {
  const bool lowbit = type == TensorType::INT4 || type == TensorType::FP8_E4M3;
  if (!is_supported_weight_type(type) && !lowbit) fail("weight type {} is not supported", tensor_type_name(type));
  if (type == TensorType::INT4 && !is_valid_int4_group(int4_group)) {
    fail("invalid INT4 group size {}: use 32 or 128 (a positive multiple of 32)", int4_group);
  }
  SyntheticPlan plan;
  const int64_t q_dim = p.n_head * p.head_dim, kv_dim = p.n_head_kv * p.head_dim;
  // GPT-2's initialisation: 0.02 everywhere, projections into the residual stream shrunk by 1/sqrt(2·layers)
  // so that the residual does not grow with depth and random logits stay finite in every type.
  const float std_in = 0.02f, std_out = 0.02f / std::sqrt(2.0f * float(p.n_layer));

  auto add = [&](std::string name, TensorType t, int64_t n_in, int64_t n_rows, bool is_matrix,
                 SyntheticTensor::Fill fill, float stddev) {
    SyntheticTensor s;
    // Tessera's INT4 pads rows to whole chunks and FP8 has no blocks: both fit any row.
    const bool any_row = t == TensorType::INT4 || t == TensorType::FP8_E4M3;
    s.type = is_matrix && !any_row ? fitting_weight_type(t, n_in) : t;
    if (s.type != t) {
      plan.notes.push_back(fmt::format("{}: row length {} is not a multiple of the {} block size {}; stored as {}",
                                       name, n_in, tensor_type_name(t), traits(t).block_elements,
                                       tensor_type_name(s.type)));
    }
    s.n_in = n_in;
    s.n_rows = n_rows;
    s.is_matrix = is_matrix;
    s.fill = fill;
    s.stddev = stddev;
    s.seed = mix64(seed ^ hash_name(name));
    s.group = s.type == TensorType::INT4 ? int4_group : 0;
    s.name = std::move(name);
    plan.tensors.push_back(std::move(s));
  };
  using Fill = SyntheticTensor::Fill;
  auto matrix = [&](std::string name, int64_t n_out, int64_t n_in, float stddev) {
    add(std::move(name), type, n_in, n_out, true, Fill::Normal, stddev);
  };
  auto ones = [&](std::string name, int64_t n) { add(std::move(name), TensorType::F32, n, 1, false, Fill::Ones, 0.0f); };
  auto bias = [&](std::string name, int64_t n) {
    add(std::move(name), TensorType::F32, n, 1, false, Fill::Normal, std_in);
  };

  matrix("token_embd.weight", p.n_vocab, p.n_embd, std_in);
  for (int64_t l = 0; l < p.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    ones(b + "attn_norm.weight", p.n_embd);
    matrix(b + "attn_q.weight", q_dim, p.n_embd, std_in);
    matrix(b + "attn_k.weight", kv_dim, p.n_embd, std_in);
    matrix(b + "attn_v.weight", kv_dim, p.n_embd, std_in);
    if (p.qkv_bias) {
      bias(b + "attn_q.bias", q_dim);
      bias(b + "attn_k.bias", kv_dim);
      bias(b + "attn_v.bias", kv_dim);
    }
    if (p.qk_norm) {
      ones(b + "attn_q_norm.weight", p.head_dim);
      ones(b + "attn_k_norm.weight", p.head_dim);
    }
    matrix(b + "attn_output.weight", p.n_embd, q_dim, std_out);
    ones(b + "ffn_norm.weight", p.n_embd);
    matrix(b + "ffn_gate.weight", p.n_ff, p.n_embd, std_in);
    matrix(b + "ffn_up.weight", p.n_ff, p.n_embd, std_in);
    matrix(b + "ffn_down.weight", p.n_embd, p.n_ff, std_out);
  }
  ones("output_norm.weight", p.n_embd);
  if (!p.tied_output) matrix("output.weight", p.n_vocab, p.n_embd, std_in);
  return plan;
}

void fill_synthetic_rows(const SyntheticTensor& t, int64_t row_begin, int64_t row_end, uint8_t* dst,
                         const SyntheticRowParams& params) {
  thread_local std::vector<float> row;
  row.resize(size_t(t.n_in));
  const uint64_t row_bytes = t.row_bytes();
  const int64_t ng = t.n_groups();
  for (int64_t r = row_begin; r < row_end; ++r) {
    if (t.fill == SyntheticTensor::Fill::Ones) {
      std::fill(row.begin(), row.end(), 1.0f);
    } else {
      normal_row(mix64(t.seed + uint64_t(r) * 0xd1b54a32d192ed03ULL), t.stddev, row.data(), t.n_in);
    }
    uint8_t* out = dst + uint64_t(r) * row_bytes;
    switch (t.type) {
      case TensorType::INT4:
        quantize_row_int4(row.data(), t.n_in, t.group, out, params.group_scales + r * ng, params.group_zeros + r * ng);
        break;
      case TensorType::FP8_E4M3:
        params.row_scales[r] = quantize_row_fp8(row.data(), t.n_in, out);
        break;
      default:
        quantize_row(t.type, row.data(), out, t.n_in, t.has_row_scales() ? &params.row_scales[r] : nullptr);
    }
  }
}

Vocab synthetic_vocab(int64_t n_tokens) {
  constexpr int64_t kSpecial = 3, kBytes = 256;
  if (n_tokens < kSpecial + kBytes) fail("a synthetic vocabulary needs at least {} tokens", kSpecial + kBytes);
  Vocab v;
  v.model = "llama";
  v.tokens.reserve(size_t(n_tokens));
  auto push = [&](std::string piece, TokenKind kind) {
    v.scores.push_back(kind == TokenKind::Normal ? -float(v.tokens.size()) : 0.0f);
    v.tokens.push_back(std::move(piece));
    v.kinds.push_back(kind);
  };
  push("<unk>", TokenKind::Unknown);
  push("<s>", TokenKind::Control);
  push("</s>", TokenKind::Control);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  for (int b = 0; b < 256; ++b) push(fmt::format("<0x{:02X}>", b), TokenKind::Byte);

  // Strings of length 1, 2, 3, ... over the alphabet, in order: every prefix of a piece is itself a piece.
  std::vector<std::string> alphabet = {"\xE2\x96\x81"};  // "▁", SentencePiece's space
  for (char c = 'a'; c <= 'z'; ++c) alphabet.emplace_back(1, c);
  for (char c = 'A'; c <= 'Z'; ++c) alphabet.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) alphabet.emplace_back(1, c);
  for (char c : std::string(".,!?'-:;()")) alphabet.emplace_back(1, c);
  std::vector<size_t> digits;  // the current string as alphabet indices
  while (int64_t(v.tokens.size()) < n_tokens) {
    // Next string in shortlex order.
    size_t i = 0;
    for (; i < digits.size(); ++i) {
      if (++digits[i] < alphabet.size()) break;
      digits[i] = 0;
    }
    if (i == digits.size()) digits.push_back(0);
    std::string piece;
    for (size_t d = digits.size(); d-- > 0;) piece += alphabet[digits[d]];
    push(std::move(piece), TokenKind::Normal);
  }
  return v;
}

void write_synthetic_model(const ModelPreset& preset, const SyntheticPlan& plan, const std::string& path,
                           const gguf::Metadata* tokenizer, ThreadPool& pool,
                           const std::function<void(const WriteProgress&)>& on_progress) {
  gguf::Writer w;
  set_model_metadata(w, preset);
  if (tokenizer != nullptr) {
    const auto tokens = std::find_if(tokenizer->begin(), tokenizer->end(),
                                     [](const auto& kv) { return kv.first == "tokenizer.ggml.tokens"; });
    if (tokens == tokenizer->end()) fail("the vocabulary source has no tokenizer.ggml.tokens to copy");
    const size_t n = tokens->second.as_array().size();
    if (int64_t(n) > preset.n_vocab) {
      fail("the vocabulary has {} tokens but {} has only {} embedding rows (make-model --vocab-size sets them)", n,
           preset.name, preset.n_vocab);
    }
    for (const auto& [key, value] : *tokenizer) w.set(key, value);
  } else {
    write_vocab(w, synthetic_vocab(preset.n_vocab));
  }

  // Producers run one after another in file order; a matrix's producer leaves its side data (I8/FP8 row
  // scales, INT4 group scales and zero points) here for the companion tensors that follow it.
  struct Side {
    std::vector<float> row_scales;
    std::vector<uint16_t> group_scales, group_zeros;
  };
  auto side = std::make_shared<Side>();
  std::vector<uint64_t> sizes;
  auto companion = [&](const std::string& name, TensorType type, std::vector<uint64_t> dims, auto member) {
    w.add_tensor(name, type, dims, [side, member, name](uint8_t* dst, uint64_t n_bytes) {
      const auto& v = (*side).*member;
      if (n_bytes != v.size() * sizeof(v[0])) fail("tensor '{}': no side data", name);
      std::memcpy(dst, v.data(), n_bytes);
    });
    sizes.push_back(dims.size() == 1 ? dims[0] * 4 : dims[0] * dims[1] * 2);
  };
  for (const SyntheticTensor& t : plan.tensors) {
    // Tessera's FP8 and INT4 are stored as raw bytes in an I8 tensor plus a format key (kernels/lowbit.h).
    const bool lowbit = t.type == TensorType::INT4 || t.type == TensorType::FP8_E4M3;
    if (t.type == TensorType::INT4) {
      w.set_string("tessera.quant." + t.name + ".format", "int4");
      w.set_u32("tessera.quant." + t.name + ".group_size", uint32_t(t.group));
    } else if (t.type == TensorType::FP8_E4M3) {
      w.set_string("tessera.quant." + t.name + ".format", "fp8_e4m3");
    }
    const std::vector<uint64_t> dims = {lowbit ? t.row_bytes() : uint64_t(t.n_in), uint64_t(t.n_rows)};
    w.add_tensor(t.name, lowbit ? TensorType::I8 : t.type, dims, [&t, &pool, side](uint8_t* dst, uint64_t n_bytes) {
      if (n_bytes != t.n_bytes()) fail("tensor '{}': size mismatch", t.name);
      side->row_scales.assign(t.has_row_scales() ? size_t(t.n_rows) : 0, 0.0f);
      side->group_scales.assign(size_t(t.n_rows * t.n_groups()), 0);
      side->group_zeros.assign(side->group_scales.size(), 0);
      fill_tensor(t, dst, {side->row_scales.data(), side->group_scales.data(), side->group_zeros.data()}, pool);
    });
    sizes.push_back(t.n_bytes());
    if (t.has_row_scales()) companion(t.name + ".scale", TensorType::F32, {uint64_t(t.n_rows)}, &Side::row_scales);
    if (t.has_group_params()) {
      const std::vector<uint64_t> gd = {uint64_t(t.n_groups()), uint64_t(t.n_rows)};
      companion(t.name + ".scale", TensorType::F16, gd, &Side::group_scales);
      companion(t.name + ".zero", TensorType::F16, gd, &Side::group_zeros);
    }
  }
  WriteProgress progress;
  progress.n_tensors = sizes.size();
  for (uint64_t s : sizes) progress.total_bytes += s;
  w.write(path, [&](size_t i, size_t) {
    progress.tensor = i;
    progress.bytes += sizes[i - 1];
    if (on_progress) on_progress(progress);
  });
}

namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Owns every tensor of an in-memory model; the Model holds it through its type-erased storage pointer.
struct SyntheticStorage {
  std::vector<std::unique_ptr<uint8_t, FreeDeleter>> tensors;
  std::vector<std::vector<float>> row_scales;  // per tensor; empty unless I8 or FP8
  std::vector<std::vector<uint16_t>> group_scales, group_zeros;  // per tensor; empty unless INT4
};

}  // namespace

std::shared_ptr<Model> make_synthetic_model(const ModelPreset& preset, const SyntheticPlan& plan, ThreadPool& pool,
                                            const LoadOptions& options) {
  const uint64_t available = available_memory_bytes();
  if (available > 0 && plan.n_bytes() > available / 10 * 9) {
    fail("{} needs {} of weights in memory but only {} is available", preset.name, gib(plan.n_bytes()),
         gib(available));
  }
  auto storage = std::make_shared<SyntheticStorage>();
  std::unordered_map<std::string, size_t> index;
  for (const SyntheticTensor& t : plan.tensors) {
    const size_t n = (t.n_bytes() + 63) / 64 * 64;
    uint8_t* p = allocate_for_streaming(n);
    if (p == nullptr) throw std::bad_alloc();
    storage->tensors.emplace_back(p);
    storage->row_scales.emplace_back(t.has_row_scales() ? size_t(t.n_rows) : 0);
    storage->group_scales.emplace_back(size_t(t.n_rows * t.n_groups()));
    storage->group_zeros.emplace_back(size_t(t.n_rows * t.n_groups()));
    fill_tensor(t, p, {storage->row_scales.back().data(), storage->group_scales.back().data(),
                       storage->group_zeros.back().data()}, pool);
    index[t.name] = index.size();
  }

  auto at = [&](const std::string& name) -> size_t {
    const auto it = index.find(name);
    if (it == index.end()) fail("synthetic model: missing tensor '{}'", name);  // a bug in the plan
    return it->second;
  };
  auto matrix = [&](const std::string& name) {
    const size_t i = at(name);
    const SyntheticTensor& t = plan.tensors[i];
    WeightMatrix m;
    m.type = t.type;
    m.n_out = t.n_rows;
    m.n_in = t.n_in;
    m.data = storage->tensors[i].get();
    m.row_bytes = t.row_bytes();
    m.row_scales = t.has_row_scales() ? storage->row_scales[i].data() : nullptr;
    if (t.has_group_params()) {
      m.group_size = int32_t(t.group);
      m.group_scales = storage->group_scales[i].data();
      m.group_zeros = storage->group_zeros[i].data();
    }
    return m;
  };
  auto vector = [&](const std::string& name) -> const float* {
    return index.count(name) ? reinterpret_cast<const float*>(storage->tensors[at(name)].get()) : nullptr;
  };

  ModelWeights w;
  w.token_embd = matrix("token_embd.weight");
  w.output_norm = vector("output_norm.weight");
  w.output = preset.tied_output ? w.token_embd : matrix("output.weight");
  for (int64_t l = 0; l < preset.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    LayerWeights L;
    L.attn_norm = vector(b + "attn_norm.weight");
    L.wq = matrix(b + "attn_q.weight");
    L.wk = matrix(b + "attn_k.weight");
    L.wv = matrix(b + "attn_v.weight");
    L.wo = matrix(b + "attn_output.weight");
    L.bq = vector(b + "attn_q.bias");
    L.bk = vector(b + "attn_k.bias");
    L.bv = vector(b + "attn_v.bias");
    L.q_norm = vector(b + "attn_q_norm.weight");
    L.k_norm = vector(b + "attn_k_norm.weight");
    L.ffn_norm = vector(b + "ffn_norm.weight");
    L.w_gate = matrix(b + "ffn_gate.weight");
    L.w_up = matrix(b + "ffn_up.weight");
    L.w_down = matrix(b + "ffn_down.weight");
    w.layers.push_back(L);
  }
  if (options.interleave_rows) {
    // The storage was allocated above and nothing else holds it: rewriting it in place is safe.
    const WeightRewriter in_place = [](const uint8_t* data, size_t, const std::function<void(uint8_t*)>& fn) {
      fn(const_cast<uint8_t*>(data));
      return true;
    };
    interleave_weights(w, in_place);
    if (options.bf16_products == Bf16Products::Bf16AndF16Weights) round_f16_panels_to_bf16(w, in_place);
    if (options.bf16_products != Bf16Products::Off) pair_bf16_product_panels(w, in_place);
  }
  std::shared_ptr<const Tokenizer> tokenizer = make_tokenizer(synthetic_vocab(preset.n_vocab));
  return Model::from_parts(preset_config(preset), std::move(w), std::move(tokenizer), std::move(storage), options);
}

}  // namespace tessera
