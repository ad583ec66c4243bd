// A loaded model: configuration, weight views bound by tensor name, and its tokenizer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/sampling_defaults.h"
#include "kernels/weight_matrix.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  WeightMatrix wq, wk, wv, wo;       // [q_dim, n_embd], [kv_dim, n_embd] x2, [n_embd, q_dim]
  const float* bq = nullptr;         // optional biases (Qwen2): [q_dim], [kv_dim], [kv_dim]
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;     // optional per-head RMSNorm (Qwen3): [head_dim]
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;   // [n_embd]
  WeightMatrix w_gate, w_up, w_down; // [n_ff, n_embd] x2, [n_embd, n_ff]
};

struct ModelWeights {
  WeightMatrix token_embd;           // [n_vocab, n_embd]: one row per token
  const float* output_norm = nullptr;
  WeightMatrix output;               // [n_vocab, n_embd]; equals token_embd when tied
  const float* rope_freqs = nullptr; // optional [head_dim / 2] divisors of the RoPE frequencies (Llama 3.1)
  std::vector<LayerWeights> layers;
};

// Which float weights multiply in bf16 (LoadOptions::bf16_products).
enum class Bf16Products {
  Off,                // every float matrix takes fp32 activations exactly (--fp32-activations)
  Bf16Weights,        // BF16 matrices take bf16 activations; F16 and F32 stay exact (the default)
  Bf16AndF16Weights,  // and F16 matrices are rounded to BF16 first (8 significant bits of their 11, as
                      // ik_llama.cpp's run-time repacking does) and take them too (--bf16-products)
};

// How to compute with the weights, chosen when loading (not stored in the file).
struct LoadOptions {
  // LLM.int8()-style outliers for INT8 (I8) weights: per token, activations with |x| above this are multiplied
  // in fp32 (kernels/int8_outliers.h); 0 = off. No effect on other weight types.
  float int8_threshold = 0.0f;
  // Q4_0, Q8_0, I8, Q4_K and Q6_K matrices of a GGUF file loaded from disk are rewritten, in this process's
  // private copy of their pages, into the layout their kernels read fastest (kernels/interleave.h); the file is
  // not changed. So are F32, F16 and BF16 matrices while all streamed weights fit in half the memory available.
  // Their whole 2 MiB stretches move to huge pages on the way (MappedFile::rewrite_private).
  bool interleave_rows = true;
  // Which float matrices rewritten into panels (above) multiply with activations rounded to bf16, on AVX-512
  // BF16's vdpbf16ps at twice the fp32 FMA rate (WeightMatrix::bf16_products). By default the BF16 ones, as
  // llama.cpp and ik_llama.cpp compute BF16 weights and as the models were trained; F16 and F32 keep fp32
  // activations. No effect on matrices left in rows, or on CPUs without AVX-512 BF16. The CPU is asked when
  // the model loads (which matrices are marked and stored in pair order) and at each call (for the kernels):
  // the ISA cap (TESSERA_ISA) is set before either.
  Bf16Products bf16_products = Bf16Products::Bf16Weights;
};

// Runs fn on writable bytes [data, data + n) and returns true, or returns false when they cannot be changed.
using WeightRewriter =
    std::function<bool(const uint8_t* data, size_t n, const std::function<void(uint8_t*)>& fn)>;

// Every matrix the forward pass multiplies with that can be rewritten for its kernels (kernels/interleave.h) is,
// through `rewrite`: the integer block types into groups of 8, and with `floats` the F32, F16 and BF16 ones into
// panels of 32. A view sharing a rewritten matrix's bytes (an embedding tied to the output) takes its layout.
void interleave_weights(ModelWeights& w, const WeightRewriter& rewrite, bool floats = true);

// For Bf16Products::Bf16AndF16Weights: F16 matrices in panels, rounded through `rewrite` to BF16 (to nearest even: 8
// significant bits of 11); a view sharing their bytes (a tied embedding) takes the new type. Nothing below the
// AVX-512 BF16 level, where no bf16 products would use them.
void round_f16_panels_to_bf16(ModelWeights& w, const WeightRewriter& rewrite);

// BF16 matrices in panels rewritten through `rewrite` in pair order (kernels/interleave.h) and marked for bf16
// products (WeightMatrix::bf16_products), where the active level has AVX-512 BF16; elsewhere they stay as they
// are and take the fp32 path.
void pair_bf16_product_panels(ModelWeights& w, const WeightRewriter& rewrite);

class Model {
 public:
  // Loads a GGUF file or a Hugging Face model folder (a directory; see hf_model.h), memory-mapped. Throws
  // tessera::Error naming the file and the problem, or for invalid options.
  static std::shared_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  // The default model linked into the binary.
  static std::shared_ptr<Model> load_embedded(const LoadOptions& options = {});
  // Binds an already parsed GGUF file.
  static std::shared_ptr<Model> from_gguf(std::shared_ptr<gguf::File> file, const LoadOptions& options = {});
  // A model built in memory (tests, synthetic models): weights point into storage the caller keeps alive.
  static std::shared_ptr<Model> from_parts(ModelConfig config, ModelWeights weights,
                                           std::shared_ptr<const Tokenizer> tokenizer,
                                           std::shared_ptr<const void> storage, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::shared_ptr<const Tokenizer> tokenizer_ptr() const { return tokenizer_; }
  const gguf::File* file() const { return file_.get(); }  // null for from_parts
  const std::string& name() const { return name_; }
  uint64_t weight_bytes() const;  // bytes of all tensors the forward pass reads
  int64_t n_int8_matrices() const;  // I8 matrices the forward pass multiplies with (what int8_threshold affects)
  // BF16 matrices marked for bf16 products (LoadOptions::bf16_products; only where the level at load had
  // AVX-512 BF16).
  int64_t n_bf16_product_matrices() const;
  // Whether any of them takes bf16 products now: marked, and the active ISA level has AVX-512 BF16.
  bool takes_bf16_products() const;
  // What the model's authors recommend for sampling (general.sampling.*, from generation_config.json).
  const SamplingDefaults& sampling_defaults() const { return sampling_defaults_; }

 private:
  Model() = default;
  void apply(const LoadOptions& options);

  std::string name_;
  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<gguf::File> file_;
  SamplingDefaults sampling_defaults_;
  std::shared_ptr<const void> storage_;          // keeps from_parts weights alive
  std::vector<std::vector<float>> owned_floats_; // norm vectors converted to fp32 at load
};

}  // namespace tessera
