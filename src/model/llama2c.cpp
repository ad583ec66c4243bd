// llama2.c checkpoint reader. run.c computes `W @ x` with W stored [out][in], the same row order as GGUF, and
// rotates adjacent pairs in RoPE like GGUF's "llama" architecture, so tensors are copied without permutation.
#include "model/llama2c.h"

#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf_writer.h"
#include "tokenizer/vocab_gguf.h"
#include "tokenizer/llama2c_vocab.h"

namespace tessera {
namespace {

struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

}  // namespace

void convert_llama2c_to_gguf(const std::string& checkpoint, const std::string& tokenizer, const std::string& output,
                             const std::string& model_name) {
  MappedFile file(checkpoint);
  const auto bytes = file.bytes();
  if (bytes.size() < sizeof(Header)) fail("{}: too short for a llama2.c checkpoint header", checkpoint);
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  const bool shared_classifier = h.vocab_size > 0;
  const int64_t vocab = h.vocab_size > 0 ? h.vocab_size : -int64_t(h.vocab_size);
  auto in_range = [](int64_t v, int64_t hi) { return v > 0 && v <= hi; };
  if (!in_range(h.dim, 1 << 16) || !in_range(h.hidden_dim, 1 << 18) || !in_range(h.n_layers, 1024) ||
      !in_range(h.n_heads, 1024) || !in_range(h.n_kv_heads, 1024) || !in_range(vocab, 1 << 20) ||
      !in_range(h.seq_len, 1 << 20) || h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0) {
    fail("{}: implausible llama2.c header (dim {}, hidden {}, layers {}, heads {}/{}, vocab {}, seq_len {})",
         checkpoint, h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len);
  }
  const int64_t dim = h.dim, hidden = h.hidden_dim, n_layers = h.n_layers;
  const int64_t head_size = dim / h.n_heads;
  const int64_t kv_dim = head_size * h.n_kv_heads;

  // Offsets (in floats) of each weight array, in file order.
  int64_t cursor = 0;
  auto take = [&](int64_t n) {
    const int64_t at = cursor;
    cursor += n;
    return at;
  };
  const int64_t tok_embd = take(vocab * dim);
  const int64_t rms_att = take(n_layers * dim);
  const int64_t wq = take(n_layers * dim * dim);
  const int64_t wk = take(n_layers * kv_dim * dim);
  const int64_t wv = take(n_layers * kv_dim * dim);
  const int64_t wo = take(n_layers * dim * dim);
  const int64_t rms_ffn = take(n_layers * dim);
  const int64_t w1 = take(n_layers * hidden * dim);
  const int64_t w2 = take(n_layers * dim * hidden);
  const int64_t w3 = take(n_layers * hidden * dim);
  const int64_t rms_final = take(dim);
  take(int64_t(h.seq_len) * head_size);  // freq_cis real and imaginary parts; GGUF recomputes RoPE from theta
  const int64_t wcls = shared_classifier ? tok_embd : take(vocab * dim);
  const uint64_t needed = sizeof(Header) + uint64_t(cursor) * sizeof(float);
  if (bytes.size() < needed) {
    fail("{}: truncated llama2.c checkpoint: {} bytes, the header implies {}", checkpoint, bytes.size(), needed);
  }

  const Vocab vocabulary = vocab_from_llama2c(tokenizer);
  if (int64_t(vocabulary.tokens.size()) != vocab) {
    fail("{}: the tokenizer has {} tokens but the checkpoint's vocabulary is {}", tokenizer, vocabulary.tokens.size(),
         vocab);
  }
  const float* weights = reinterpret_cast<const float*>(bytes.data() + sizeof(Header));
  gguf::Writer writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("general.name", model_name);
  writer.set_string("general.license", "MIT");
  writer.set_u32("general.file_type", 0);  // all F32
  writer.set_u32("llama.context_length", uint32_t(h.seq_len));
  writer.set_u32("llama.embedding_length", uint32_t(dim));
  writer.set_u32("llama.block_count", uint32_t(n_layers));
  writer.set_u32("llama.feed_forward_length", uint32_t(hidden));
  writer.set_u32("llama.attention.head_count", uint32_t(h.n_heads));
  writer.set_u32("llama.attention.head_count_kv", uint32_t(h.n_kv_heads));
  writer.set_u32("llama.rope.dimension_count", uint32_t(head_size));
  writer.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  writer.set_f32("llama.rope.freq_base", 10000.0f);
  write_vocab(writer, vocabulary);

  auto add = [&](const std::string& name, int64_t offset, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    const uint8_t* src = reinterpret_cast<const uint8_t*>(weights + offset);
    writer.add_tensor(name, TensorType::F32, std::move(dims),
                      [src, n](uint8_t* dst, uint64_t n_bytes) { std::memcpy(dst, src, std::min(n_bytes, n * 4)); });
  };
  add("token_embd.weight", tok_embd, {uint64_t(dim), uint64_t(vocab)});
  add("output_norm.weight", rms_final, {uint64_t(dim)});
  if (!shared_classifier) add("output.weight", wcls, {uint64_t(dim), uint64_t(vocab)});
  for (int64_t l = 0; l < n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", rms_att + l * dim, {uint64_t(dim)});
    add(p + "attn_q.weight", wq + l * dim * dim, {uint64_t(dim), uint64_t(dim)});
    add(p + "attn_k.weight", wk + l * kv_dim * dim, {uint64_t(dim), uint64_t(kv_dim)});
    add(p + "attn_v.weight", wv + l * kv_dim * dim, {uint64_t(dim), uint64_t(kv_dim)});
    add(p + "attn_output.weight", wo + l * dim * dim, {uint64_t(dim), uint64_t(dim)});
    add(p + "ffn_norm.weight", rms_ffn + l * dim, {uint64_t(dim)});
    add(p + "ffn_gate.weight", w1 + l * hidden * dim, {uint64_t(dim), uint64_t(hidden)});
    add(p + "ffn_down.weight", w2 + l * dim * hidden, {uint64_t(hidden), uint64_t(dim)});
    add(p + "ffn_up.weight", w3 + l * hidden * dim, {uint64_t(dim), uint64_t(hidden)});
  }
  writer.write(output);
}

}  // namespace tessera
