// The engine's forward pass against a deliberately naive fp64 implementation written from the equations
// (reference_model.h), on random small models: GQA and MHA, odd sizes, both RoPE layouts, tied and untied heads,
// biases and QK-norm. Hugging Face folders (rope scaling, q/k permutation) are checked in hf_model_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "engine/offline_engine.h"
#include "model/model.h"
#include "hf_test_folder.h"
#include "reference_model.h"

namespace tessera {
namespace {

using testing::compare_logits;
using testing::hf_spec;
using testing::HfSpec;
using testing::HfTestModel;
using testing::TempDir;
using testing::write_hf_folder;
using testing::LogitDiff;
using testing::model_from_reference;
using testing::reference_logits;
using testing::RefLayer;
using testing::RefModel;

struct Variant {
  const char* name;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  RopeLayout rope;
  bool tied, bias, qk_norm;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

RefModel random_model(const Variant& v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random = [&](int64_t n, float scale, float offset = 0.0f) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = offset + scale * dist(rng);
    return x;
  };
  RefModel m;
  m.n_vocab = v.n_vocab;
  m.n_embd = v.n_embd;
  m.n_head = v.n_head;
  m.n_head_kv = v.n_head_kv;
  m.head_dim = v.head_dim;
  m.n_ff = v.n_ff;
  m.rope_neox = v.rope == RopeLayout::NeoX;
  const int64_t q_dim = v.n_head * v.head_dim, kv_dim = v.n_head_kv * v.head_dim;
  const float s = 0.3f;
  m.token_embd = random(v.n_vocab * v.n_embd, 1.0f);
  m.output_norm = random(v.n_embd, 0.1f, 1.0f);
  if (!v.tied) m.output = random(v.n_vocab * v.n_embd, s);
  for (int64_t l = 0; l < v.n_layer; ++l) {
    RefLayer L;
    L.attn_norm = random(v.n_embd, 0.1f, 1.0f);
    L.wq = random(q_dim * v.n_embd, s);
    L.wk = random(kv_dim * v.n_embd, s);
    L.wv = random(kv_dim * v.n_embd, s);
    L.wo = random(v.n_embd * q_dim, s);
    if (v.bias) {
      L.bq = random(q_dim, s);
      L.bk = random(kv_dim, s);
      L.bv = random(kv_dim, s);
    }
    if (v.qk_norm) {
      L.q_norm = random(v.head_dim, 0.1f, 1.0f);
      L.k_norm = random(v.head_dim, 0.1f, 1.0f);
    }
    L.ffn_norm = random(v.n_embd, 0.1f, 1.0f);
    L.w_gate = random(v.n_ff * v.n_embd, s);
    L.w_up = random(v.n_ff * v.n_embd, s);
    L.w_down = random(v.n_embd * v.n_ff, s);
    m.layers.push_back(std::move(L));
  }
  return m;
}

class ReferenceForward : public ::testing::TestWithParam<Variant> {};

TEST_P(ReferenceForward, EngineAgreesWithNaiveFp64) {
  const Variant& v = GetParam();
  const RefModel ref = random_model(v, 1234);
  auto model = model_from_reference(ref, "llama");
  std::mt19937 rng(99);
  std::vector<int32_t> tokens(23);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(v.n_vocab));
  const auto expected = reference_logits(ref, tokens);

  for (int threads : {1, 2}) {
    for (int64_t chunk : {int64_t(1), int64_t(5), int64_t(64)}) {
      ThreadPool pool(threads);
      OfflineEngine generator(model, pool, 32, chunk);
      const LogitDiff d = compare_logits(expected, generator.prompt_logits(tokens));
      // fp32 accumulation over a few hundred terms: relative error well under 1e-4 of the logit scale.
      EXPECT_LT(d.max_diff, 1e-4 * std::max(1.0, d.max_ref)) << v.name << " threads=" << threads << " chunk=" << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ReferenceForward,
    ::testing::Values(
        Variant{"mha_interleaved_untied", 32, 2, 4, 4, 8, 72, 97, RopeLayout::Interleaved, false, false, false},
        Variant{"gqa_neox_tied", 48, 2, 6, 2, 8, 37, 101, RopeLayout::NeoX, true, false, false},
        Variant{"gqa_interleaved_tied_odd", 40, 3, 5, 1, 8, 61, 53, RopeLayout::Interleaved, true, false, false},
        Variant{"mqa_neox_untied", 24, 1, 3, 1, 8, 33, 67, RopeLayout::NeoX, false, false, false},
        Variant{"qwen2_bias", 32, 2, 4, 2, 8, 45, 89, RopeLayout::NeoX, false, true, false},
        Variant{"qwen3_qknorm_headdim", 32, 2, 4, 2, 12, 45, 89, RopeLayout::NeoX, true, false, true}),
    [](const auto& info) { return std::string(info.param.name); });


// Hugging Face folders served directly (Model::load on the directory) against the reference computing Hugging
// Face's semantics on the tensors as stored: rotate-half RoPE on the unpermuted q/k rows, llama3/linear frequency
// divisors from config.json's formula. Agreement shows the loader's q/k permutation, rope_freqs, biases, QK-norm
// and head_dim handling are right, in every dtype.
struct HfVariant {
  const char* name;
  HfSpec spec;
};

void PrintTo(const HfVariant& v, std::ostream* os) { *os << v.name; }

std::vector<HfVariant> hf_variants() {
  std::vector<HfVariant> v;
  v.push_back({"qwen3_qknorm_headdim_tied_bf16", testing::qwen3_test_spec()});
  HfSpec llama3 = testing::llama3_test_spec();  // GQA, untied, here in three shards
  llama3.shards = 3;
  v.push_back({"llama3_ropescaling_gqa_sharded_f16", llama3});
  v.push_back({"qwen2_bias_f32", hf_spec("Qwen2ForCausalLM", 32, 4, 2, 0, false, "F32")});
  HfSpec mistral = hf_spec("MistralForCausalLM", 32, 4, 4, 0, false, "F32");
  mistral.sliding_window = 32;  // < max_position_embeddings 64: the context stops at 32
  v.push_back({"mistral_mha_window_f32", mistral});
  HfSpec llama_linear = hf_spec("LlamaForCausalLM", 32, 4, 1, 12, true, "F16");  // permutation with head_dim 12
  llama_linear.attention_bias = true;
  llama_linear.rope_scaling = {{"type", "linear"}, {"factor", 4.0}};
  v.push_back({"llama_bias_linear_headdim_mqa_f16", llama_linear});
  return v;
}

class ReferenceForwardHf : public ::testing::TestWithParam<HfVariant> {};

TEST_P(ReferenceForwardHf, FolderServedDirectlyAgreesWithNaiveFp64) {
  const HfVariant& v = GetParam();
  TempDir dir(v.name);
  const HfTestModel hf = write_hf_folder(v.spec, dir.path, 4321);
  const auto model = Model::load(dir.path, LoadOptions{.bf16_products = Bf16Products::Off});  // exact fp32
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(23);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(v.spec.n_vocab));
  const auto expected = reference_logits(hf.ref, tokens);

  ThreadPool pool(2);
  OfflineEngine generator(model, pool, 32, 5);
  const LogitDiff d = compare_logits(expected, generator.prompt_logits(tokens));
  const double tolerance = 1e-4 * std::max(1.0, d.max_ref);
  EXPECT_LT(d.max_diff, tolerance) << v.name;

  // The features matter at these sizes: getting the pair layout or the frequency divisors wrong would show.
  RefModel wrong = hf.ref;
  wrong.rope_neox = !wrong.rope_neox;
  EXPECT_GT(compare_logits(reference_logits(wrong, tokens), generator.prompt_logits(tokens)).max_diff, 100 * tolerance);
  if (!hf.ref.rope_divisors.empty()) {
    wrong = hf.ref;
    wrong.rope_divisors.clear();
    EXPECT_GT(compare_logits(reference_logits(wrong, tokens), generator.prompt_logits(tokens)).max_diff,
              100 * tolerance);
  }

  // By default BF16 weights take bf16 products where the CPU has them: activations rounded to 8 significant
  // bits keep the logits within 2 % of their largest reference value.
  const auto by_default = Model::load(dir.path);
  if (v.spec.dtype == "BF16") {  // marked where the level has AVX-512 BF16
    EXPECT_EQ(by_default->n_bf16_product_matrices() > 0, active_isa() >= Isa::Avx512Bf16);
  }
  if (by_default->takes_bf16_products()) {
    OfflineEngine bf16(by_default, pool, 32, 5);
    const LogitDiff b = compare_logits(expected, bf16.prompt_logits(tokens));
    EXPECT_GT(b.max_diff, 0.0);
    EXPECT_LT(b.max_diff, 2e-2 * std::max(1.0, b.max_ref)) << v.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, ReferenceForwardHf, ::testing::ValuesIn(hf_variants()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera
