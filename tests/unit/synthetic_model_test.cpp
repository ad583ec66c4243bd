// Synthetic models: the preset table against the published shapes, files written for every weight type and
// loaded back, in-memory (synthetic) weights identical to the file's, and the bench helpers on a tiny model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "bench/model_bench.h"
#include "bench/process_memory.h"
#include "bench/roofline.h"
#include "core/error.h"
#include "engine/offline_engine.h"
#include "core/cpu_features.h"
#include "formats/gguf.h"
#include "tokenizer/vocab_gguf.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/synthetic.h"
#include "cli_runner.h"
#include "test_paths.h"

namespace tessera {
namespace {

ThreadPool& test_pool() {
  static ThreadPool pool(2);
  return pool;
}

// A file under /tmp removed when the test ends.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem)
      : path("/tmp/tessera_synthetic_" + std::to_string(::getpid()) + "_" + stem + ".gguf") {}
  ~TempFile() { std::remove(path.c_str()); }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

const ModelPreset& preset(std::string_view name) {
  const ModelPreset* p = find_model_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return *p;
}

// A test-tiny model of one weight type written to a temporary file, the file's bytes as written, and a prompt.
struct TinyModelFile {
  const ModelPreset& p = preset("test-tiny");
  TempFile file;
  std::string before;
  std::vector<int32_t> prompt = {1, 300, 17, 42, 99};
  TinyModelFile(TensorType type, const std::string& stem) : file(stem) {
    write_synthetic_model(p, plan_synthetic_model(p, type, 3), file.path, nullptr, test_pool());
    before = read_file(file.path);
  }
};

// The published configurations (config.json on Hugging Face), written out again independently of presets.cpp.
struct Published {
  std::string_view name, arch;
  int64_t hidden, layers, heads, kv_heads, head_dim, ffn, vocab;
  double theta;
  bool tied, bias, qk_norm;
};
constexpr Published kPublished[] = {
    {"tinyllama-1.1b", "llama", 2048, 22, 32, 4, 64, 5632, 32000, 1e4, false, false, false},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 5e5, true, false, false},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 1e6, true, true, false},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 1e6, true, false, true},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 1e6, false, false, true},
    {"qwen3-32b", "qwen3", 5120, 64, 64, 8, 128, 25600, 151936, 1e6, false, false, true},
};

TEST(SyntheticModel, PresetsMatchPublishedShapes) {
  for (const Published& e : kPublished) {
    SCOPED_TRACE(std::string(e.name));
    const ModelPreset& p = preset(e.name);
    EXPECT_FALSE(p.hidden);
    const ModelConfig c = preset_config(p);
    EXPECT_EQ(c.architecture, e.arch);
    EXPECT_EQ(c.n_embd, e.hidden);
    EXPECT_EQ(c.n_layer, e.layers);
    EXPECT_EQ(c.n_head, e.heads);
    EXPECT_EQ(c.n_head_kv, e.kv_heads);
    EXPECT_EQ(c.head_dim, e.head_dim);
    EXPECT_EQ(c.n_ff, e.ffn);
    EXPECT_EQ(c.n_vocab, e.vocab);
    EXPECT_FLOAT_EQ(c.rope_theta, float(e.theta));
    EXPECT_EQ(c.tied_output, e.tied);
    EXPECT_EQ(p.qkv_bias, e.bias);
    EXPECT_EQ(p.qk_norm, e.qk_norm);
    EXPECT_EQ(c.rope_layout, e.arch == "llama" ? RopeLayout::Interleaved : RopeLayout::NeoX);
    EXPECT_GT(c.n_ctx_train, 2047);
  }
  EXPECT_EQ(preset("qwen3-32b").n_ctx, 40960);
  EXPECT_EQ(find_model_preset("gpt-5"), nullptr);
  EXPECT_EQ(model_preset_names().find("test-tiny"), std::string::npos);
}

TEST(SyntheticModel, PlansHaveEveryTensorAndPublishedSizes) {
  for (const Published& e : kPublished) {
    SCOPED_TRACE(std::string(e.name));
    const SyntheticPlan plan = plan_synthetic_model(preset(e.name), TensorType::Q8_0, 1);
    const size_t per_layer = 9 + (e.bias ? 3 : 0) + (e.qk_norm ? 2 : 0);
    EXPECT_EQ(plan.tensors.size(), 2 + (e.tied ? 0 : 1) + per_layer * size_t(e.layers));
    // Q8_0 stores 34 bytes per 32 weights: the plan's size is the parameter count times 34/32 (norms in F32).
    uint64_t params = 0;
    for (const auto& t : plan.tensors) params += t.is_matrix ? uint64_t(t.n_in * t.n_rows) : 0;
    EXPECT_EQ(plan.n_bytes() - [&] {
      uint64_t f32 = 0;
      for (const auto& t : plan.tensors) f32 += t.is_matrix ? 0 : t.n_bytes();
      return f32;
    }(), params / 32 * 34);
  }
  // Parameter counts as the model cards give them (a tied embedding counted once; norms and biases included).
  auto parameters = [](std::string_view name) {
    uint64_t n = 0;
    for (const auto& t : plan_synthetic_model(preset(name), TensorType::F32, 1).tensors) n += uint64_t(t.n_in * t.n_rows);
    return n;
  };
  EXPECT_EQ(parameters("tinyllama-1.1b"), 1'100'048'384u);
  EXPECT_EQ(parameters("llama-3.2-1b"), 1'235'814'400u);
  EXPECT_EQ(parameters("qwen2.5-0.5b"), 494'032'768u);
  EXPECT_EQ(parameters("qwen3-0.6b"), 596'049'920u);
  EXPECT_EQ(parameters("qwen3-8b"), 8'190'735'360u);
  EXPECT_EQ(parameters("qwen3-32b"), 32'762'123'264u);
}

TEST(SyntheticModel, KQuantsFallBackWhereRowsDoNotFit) {
  EXPECT_TRUE(plan_synthetic_model(preset("tinyllama-1.1b"), TensorType::Q4_K, 1).notes.empty());
  EXPECT_TRUE(plan_synthetic_model(preset("qwen3-8b"), TensorType::Q6_K, 1).notes.empty());
  // Qwen2.5-0.5B's 896-wide rows are not a multiple of 256; its 4864-wide ffn_down rows are.
  const SyntheticPlan plan = plan_synthetic_model(preset("qwen2.5-0.5b"), TensorType::Q4_K, 1);
  EXPECT_FALSE(plan.notes.empty());
  for (const auto& t : plan.tensors) {
    if (!t.is_matrix) continue;
    EXPECT_EQ(t.type, t.n_in % 256 == 0 ? TensorType::Q4_K : TensorType::Q4_0) << t.name;
  }
  const SyntheticPlan q6 = plan_synthetic_model(preset("qwen2.5-0.5b"), TensorType::Q6_K, 1);
  EXPECT_EQ(q6.tensors[0].type, TensorType::Q8_0);
  EXPECT_THROW(plan_synthetic_model(preset("test-tiny"), TensorType::Q8_1, 1), Error);
}

TEST(SyntheticModel, WeightTypeNames) {
  EXPECT_EQ(weight_type_from_name("int8"), TensorType::I8);
  EXPECT_EQ(weight_type_from_name("q4_k"), TensorType::Q4_K);
  EXPECT_EQ(weight_type_from_name("bf16"), TensorType::BF16);
  EXPECT_FALSE(weight_type_from_name("i8").has_value());  // spelled int8 on the command line
  EXPECT_FALSE(weight_type_from_name("q5_1").has_value());
  EXPECT_FALSE(weight_type_from_name("nonsense").has_value());
}

TEST(SyntheticModel, VocabularyTokenizesAndRoundTrips) {
  const Vocab v = synthetic_vocab(5000);
  ASSERT_EQ(v.tokens.size(), 5000u);
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.tokens[258], "<0xFF>");
  const auto tokenizer = make_tokenizer(v);
  const std::string text = "Hello world, 42 times! \xC3\xA9t\xC3\xA9";  // é is not in the alphabet: bytes
  const auto ids = tokenizer->encode(text, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_LT(ids.size(), text.size());  // merges happened
  EXPECT_EQ(tokenizer->decode(std::span(ids).subspan(1)), text);
  EXPECT_THROW(synthetic_vocab(100), Error);
}

std::vector<float> logits_of(std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt) {
  OfflineEngine g(model, test_pool(), 64);
  return g.prompt_logits(prompt);
}

// Every weight type on every tiny architecture: written, loaded, generating, and equal to the in-memory model.
TEST(SyntheticModel, WritesLoadsAndRunsEveryType) {
  for (std::string_view name : {"test-tiny", "test-tiny-qwen2", "test-tiny-qwen3"}) {
    for (std::string_view type_name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "int8", "fp8", "int4"}) {
      SCOPED_TRACE(std::string(name) + " " + std::string(type_name));
      const ModelPreset& p = preset(name);
      const TensorType type = *weight_type_from_name(type_name);
      const SyntheticPlan plan = plan_synthetic_model(p, type, 7);
      TempFile file(std::string(name) + "_" + std::string(type_name));
      write_synthetic_model(p, plan, file.path, nullptr, test_pool());

      const auto model = Model::load(file.path);
      const ModelConfig& c = model->config();
      EXPECT_EQ(c.architecture, p.architecture);
      EXPECT_EQ(c.n_embd, p.n_embd);
      EXPECT_EQ(c.n_layer, p.n_layer);
      EXPECT_EQ(c.head_dim, p.head_dim);
      EXPECT_EQ(c.n_vocab, p.n_vocab);
      EXPECT_EQ(c.tied_output, p.tied_output);
      EXPECT_EQ(c.n_ctx_train, p.n_ctx);
      EXPECT_EQ((model->weights().layers[0].bq != nullptr), p.qkv_bias);
      EXPECT_EQ((model->weights().layers[0].q_norm != nullptr), p.qk_norm);
      // test-tiny-qwen2's 96-wide rows do not fit K-quant blocks: those matrices fall back, as planned.
      EXPECT_EQ(model->weights().layers[0].w_up.type, p.n_embd % 256 == 0 ? type : plan.tensors[0].type);
      EXPECT_EQ(model->weights().layers[0].w_down.type, type);
      uint64_t tensor_bytes = 0;
      for (const auto& t : model->file()->tensors()) tensor_bytes += t.n_bytes;
      EXPECT_EQ(tensor_bytes, plan.n_bytes());
      EXPECT_EQ(model->tokenizer().n_vocab(), p.n_vocab);

      SamplingParams greedy;
      greedy.temperature = 0.0f;
      greedy.max_tokens = 4;
      greedy.ignore_eos = true;
      OfflineEngine g(model, test_pool(), 64);
      const GenerationResult r = g.generate(model->tokenizer().encode("Once upon a time", true), greedy);
      EXPECT_EQ(r.tokens.size(), 4u);
      // Every weight has been read: the mapping is resident, and never more than the file.
      const uint64_t resident = resident_bytes_of_mapping(model->file()->bytes());
      EXPECT_GE(resident, tensor_bytes / 2);
      EXPECT_LE(resident, (model->file()->file_size() + 4095) / 4096 * 4096);

      const std::vector<int32_t> prompt = {1, 300, 17, 42, 99};
      const std::vector<float> from_file = logits_of(model, prompt);
      for (float x : from_file) ASSERT_TRUE(std::isfinite(x));
      // Same seed, same bytes: the in-memory model computes exactly the file model's logits.
      const std::vector<float> from_memory = logits_of(make_synthetic_model(p, plan, test_pool()), prompt);
      ASSERT_EQ(from_file, from_memory);
    }
  }
}

// Q4_0, Q8_0 and I8 matrices are interleaved for the kernels (kernels/interleave.h) in the process's private copy
// of the mapping: the file keeps its bytes, and the logits stay those of the row layout up to fp32 summation
// order (exactly those for I8, whose rows reduce in int32).
TEST(SyntheticModel, BlockTypesInterleavedInPrivatePagesOnly) {
  for (const TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::I8}) {
    SCOPED_TRACE(tensor_type_name(type));
    const TinyModelFile tiny(type, "interleave");
    {
      const auto model = Model::load(tiny.file.path);
      for (const WeightMatrix* m : {&model->weights().layers[0].wq, &model->weights().layers[1].w_down,
                                    &model->weights().output}) {
        EXPECT_EQ(m->layout, WeightLayout::Interleaved8);
      }
      EXPECT_EQ(model->weights().token_embd.layout,
                tiny.p.tied_output ? WeightLayout::Interleaved8 : WeightLayout::Rows);  // only looked up unless tied
      const std::vector<float> a = logits_of(model, tiny.prompt);
      // The rewritten pages replaced the file's pages in the mapping: resident no more than the file.
      EXPECT_LE(resident_bytes_of_mapping(model->file()->bytes()), (model->file()->file_size() + 4095) / 4096 * 4096);
      EXPECT_EQ(read_file(tiny.file.path), tiny.before);  // while mapped and rewritten

      const auto plain = Model::load(tiny.file.path, LoadOptions{.interleave_rows = false});
      EXPECT_EQ(plain->weights().layers[0].wq.layout, WeightLayout::Rows);
      const std::vector<float> b = logits_of(plain, tiny.prompt);
      ASSERT_EQ(a.size(), b.size());
      const float scale = max_abs(b);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * scale) << i;
      if (type == TensorType::I8) {
        EXPECT_EQ(a, b);  // the same int32 row sums and the same final multiply
      } else {
        EXPECT_NE(a, b);  // block scales applied in a different order: the interleaved kernels really ran
      }
    }
    EXPECT_EQ(read_file(tiny.file.path), tiny.before);
  }
}

// Bf16Products: where the kernels run with AVX-512 BF16, BF16 matrices (in panels here) take bf16 products by
// default (on AMX-BF16 tiles at the amx level), and with --bf16-products F16 ones too, rounded to BF16 in private
// pages (a tied embedding with them); the logits stay near the exact fp32 path's (--fp32-activations). Elsewhere no option changes a bit. The file is
// unchanged either way.
TEST(SyntheticModel, Bf16ProductsTakeBf16PanelsByDefaultAndF16OnRequest) {
  for (const TensorType type : {TensorType::BF16, TensorType::F16}) {
    SCOPED_TRACE(tensor_type_name(type));
    const TinyModelFile tiny(type, "bf16_products");
    const auto exact = Model::load(tiny.file.path, LoadOptions{.bf16_products = Bf16Products::Off});
    EXPECT_EQ(exact->n_bf16_product_matrices(), 0);
    const std::vector<float> a = logits_of(exact, tiny.prompt);
    const int64_t n_linear = 7 * int64_t(exact->weights().layers.size()) + 1;
    for (const Bf16Products mode : {Bf16Products::Bf16Weights, Bf16Products::Bf16AndF16Weights}) {
      SCOPED_TRACE(int(mode));
      const auto fast = Model::load(tiny.file.path, LoadOptions{.bf16_products = mode});
      const std::vector<float> b = logits_of(fast, tiny.prompt);
      const bool takes = type == TensorType::BF16 || mode == Bf16Products::Bf16AndF16Weights;
      if (active_isa() < Isa::Avx512Bf16 || !takes) {
        EXPECT_EQ(fast->n_bf16_product_matrices(), 0);  // marked (and paired) only where they are taken
        EXPECT_EQ(fast->weights().layers[0].wq.type, type);
        EXPECT_EQ(a, b);
      } else {
        EXPECT_EQ(fast->n_bf16_product_matrices(), n_linear);
        EXPECT_EQ(fast->weights().layers[0].wq.type, TensorType::BF16);
        EXPECT_EQ(fast->weights().token_embd.type, tiny.p.tied_output ? TensorType::BF16 : type);
        // The bench measures them against the peak of what computes them: AMX-BF16 tiles or vdpbf16ps.
        EXPECT_EQ(compute_peak_of(*fast), active_isa() >= Isa::Amx ? ComputePeak::Bf16Tiles : ComputePeak::Bf16);
        ASSERT_EQ(a.size(), b.size());
        const float scale = max_abs(a);
        for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-2f * scale) << i;
        EXPECT_NE(a, b);
      }
    }
    EXPECT_EQ(read_file(tiny.file.path), tiny.before);
  }
  EXPECT_EQ(LoadOptions{}.bf16_products, Bf16Products::Bf16Weights);
}

// The interleaved matrices' pages move to huge-page memory as whole 2 MiB pages of merged spans, so nearly all
// of them do, not just each matrix's interior (matrices here are 0.3-3 MiB). The logits are exactly those of
// the same weights built in memory, and the mapping's resident size stays within the file.
TEST(SyntheticModel, InterleavedWeightsMoveToHugePagesWhole) {
  ModelPreset p = preset("test-tiny");
  p.n_embd = 1024, p.n_head = 16, p.n_head_kv = 4, p.n_ff = 2816, p.n_layer = 3;
  TempFile file("huge_pages");
  const SyntheticPlan plan = plan_synthetic_model(p, TensorType::Q8_0, 5);
  write_synthetic_model(p, plan, file.path, nullptr, test_pool());
  const auto model = Model::load(file.path);
  uint64_t interleaved = 0;
  for (const LayerWeights& l : model->weights().layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      ASSERT_EQ(m->layout, WeightLayout::Interleaved8);
      interleaved += uint64_t(m->n_out) * m->row_bytes;
    }
  }
  const uint64_t moved = anonymous_bytes_of_mapping(model->file()->bytes());
  EXPECT_GE(moved, interleaved * 8 / 10) << "moved " << moved << " of " << interleaved;
  EXPECT_LE(moved, model->file()->file_size());
  const std::vector<int32_t> prompt = {1, 300, 17, 42, 99};
  const std::vector<float> a = logits_of(model, prompt);
  EXPECT_LE(resident_bytes_of_mapping(model->file()->bytes()), (model->file()->file_size() + 4095) / 4096 * 4096);
  // The same bytes built in memory, interleaved there: exactly the same logits.
  ASSERT_EQ(a, logits_of(make_synthetic_model(p, plan, test_pool()), prompt));
}

TEST(SyntheticModel, SeedChangesWeights) {
  const ModelPreset& p = preset("test-tiny");
  const std::vector<int32_t> prompt = {1, 5, 6};
  const auto a = logits_of(make_synthetic_model(p, plan_synthetic_model(p, TensorType::F32, 1), test_pool()), prompt);
  const auto b = logits_of(make_synthetic_model(p, plan_synthetic_model(p, TensorType::F32, 2), test_pool()), prompt);
  EXPECT_NE(a, b);
}

TEST(SyntheticModel, VocabularyCopiedFromAnotherFile) {
  const std::string spm = testing::shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  const auto source = gguf::File::open(spm);
  // A Llama-vocabulary model small enough for a test: 32000 rows of 64.
  ModelPreset p = preset("test-tiny");
  p.n_embd = 64;
  p.n_head = 2;
  p.n_head_kv = 1;
  p.head_dim = 32;
  p.n_ff = 128;
  p.n_vocab = 32000;
  TempFile file("vocab_from");
  const gguf::Metadata tokenizer = tokenizer_metadata_of(*source);
  write_synthetic_model(p, plan_synthetic_model(p, TensorType::Q8_0, 1), file.path, &tokenizer, test_pool());
  const auto model = Model::load(file.path);
  EXPECT_EQ(model->tokenizer().n_vocab(), 32000);
  EXPECT_EQ(model->tokenizer().vocab().tokens, vocab_from_gguf(*source).tokens);
  EXPECT_EQ(model->tokenizer().decode(model->tokenizer().encode(" Hello world", false)), " Hello world");

  // A vocabulary larger than the embedding is refused, and nothing is left behind.
  TempFile too_small("vocab_too_big");
  EXPECT_THROW(write_synthetic_model(preset("test-tiny"), plan_synthetic_model(preset("test-tiny"), TensorType::F16, 1),
                                     too_small.path, &tokenizer, test_pool()),
               Error);
  EXPECT_NE(::access(too_small.path.c_str(), F_OK), 0);
}

TEST(SyntheticModel, BenchHelpersRunOnSyntheticWeights) {
  const ModelPreset& p = preset("test-tiny-qwen3");
  const auto model = make_synthetic_model(p, plan_synthetic_model(p, TensorType::I8, 3), test_pool());
  const ThroughputMeasurement prefill = measure_prefill(model, test_pool(), 32, 1);
  EXPECT_EQ(prefill.n_tokens, 32);
  EXPECT_GT(prefill.tokens_per_s, 0.0);
  const ThroughputMeasurement decode = measure_decode(model, test_pool(), 4, 8, 2);
  EXPECT_EQ(decode.n_tokens, 4);
  EXPECT_EQ(decode.runs, 2);
  EXPECT_GT(decode.tokens_per_s, 0.0);
  EXPECT_EQ(layer_matmul_elements(*model),
            uint64_t(p.n_layer) * uint64_t(p.n_embd) * uint64_t(2 * 512 + 2 * 2 * 64 + 3 * p.n_ff));
}

TEST(SyntheticModel, RooflineProbesMeasureSomething) {
  ReadBandwidthProbe probe(test_pool(), size_t(8) << 20);
  EXPECT_GE(probe.bytes(), size_t(8) << 20);
  EXPECT_GT(probe.measure_gbs(1), 0.1);
  EXPECT_GT(measure_fp32_peak_gflops(test_pool(), 1), 0.1);
  EXPECT_GT(measure_int8_peak_gops(test_pool(), 1), 0.1);
  EXPECT_GT(measure_int8_product_peak_gops(test_pool(), 1), 0.1);
  EXPECT_FALSE(int8_peak_instruction().empty());
  // AMX tiles have their own int8 and bf16 peaks, probed where the level has them.
  EXPECT_EQ(has_tile_peaks(), active_isa() >= Isa::Amx);
  if (has_tile_peaks()) {
    EXPECT_GT(measure_int8_tile_peak_gops(test_pool(), 1), 0.1);
    EXPECT_GT(measure_bf16_tile_peak_gflops(test_pool(), 1), 0.1);
  } else {
    EXPECT_EQ(measure_int8_tile_peak_gops(test_pool(), 1), 0.0);
    EXPECT_EQ(measure_bf16_tile_peak_gflops(test_pool(), 1), 0.0);
  }
  const ProcessMemory m = read_process_memory();
  EXPECT_GT(m.rss, 0u);
  EXPECT_LE(m.rss_file, m.rss);
}

// Runs the tessera binary with `args`; returns its exit status and stdout.
std::pair<int, std::string> run_tessera(const std::string& args) {
  testing::ShellOutput r = testing::run_shell(testing::tessera_binary() + " " + args + " 2>/dev/null");
  return {r.exit_code, std::move(r.out)};
}

TEST(SyntheticModel, CommandLine) {
  TempFile file("cli");
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type q4_0 -t 2 -o " + file.path).first, 0);
  EXPECT_EQ(Model::load(file.path)->weights().layers[0].wq.type, TensorType::Q4_0);
  EXPECT_EQ(run_tessera("make-model --preset no-such-model --type q4_0 -o " + file.path + "x").first, 1);
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type q5_1 -o " + file.path + "x").first, 1);
  EXPECT_EQ(run_tessera("bench --preset test-tiny").first, 1);  // --type missing
  // INT4 (round-to-nearest on the random weights): the same bytes whatever the thread count; bad groups refused.
  TempFile int4_one("cli_int4_1"), int4_two("cli_int4_2");
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type int4 --group 128 -t 1 -o " + int4_one.path).first, 0);
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type int4 --group 128 -t 2 -o " + int4_two.path).first, 0);
  EXPECT_EQ(read_file(int4_one.path), read_file(int4_two.path));
  const auto int4_model = Model::load(int4_one.path);
  EXPECT_EQ(int4_model->weights().layers[0].wq.type, TensorType::INT4);
  EXPECT_EQ(int4_model->weights().layers[0].wq.group_size, 128);
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type int4 --group 48 -o " + file.path + "x").first, 1);
  EXPECT_EQ(run_tessera("make-model --preset test-tiny --type fp8 -o " + int4_two.path).first, 0);
  EXPECT_EQ(Model::load(int4_two.path)->weights().layers[0].w_down.type, TensorType::FP8_E4M3);

  const auto [status, out] = run_tessera("bench -m " + file.path + " -t 2 --quick --json");
  ASSERT_EQ(status, 0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["type"], "Q4_0");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_FALSE(j["amx_int8_tiles"].get<bool>());  // Q4_0 products never take the AMX tiles
  EXPECT_FALSE(j["amx_bf16_tiles"].get<bool>());
  EXPECT_EQ(j.contains("int8_tile_peak_gops"), has_tile_peaks());
  EXPECT_EQ(j.contains("bf16_tile_peak_gflops"), has_tile_peaks());
  for (const char* key : {"bandwidth_gbs", "bandwidth_before_gbs", "bandwidth_after_gbs", "fp32_peak_gflops",
                          "int8_peak_gops", "int8_product_peak_gops", "decode_bandwidth_ratio", "prefill_peak_ratio",
                          "prefill_product_peak_ratio", "batch16_speedup"}) {
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
  // The peaks are the best of three probes: at the start, and right before and after the prefills.
  for (const auto& [peak, probes] : {std::pair{"fp32_peak_gflops", "fp32_peak_probes_gflops"},
                                      std::pair{"int8_peak_gops", "int8_peak_probes_gops"},
                                      std::pair{"int8_product_peak_gops", "int8_product_peak_probes_gops"}}) {
    ASSERT_EQ(j[probes].size(), 3u) << probes;
    double best = 0.0;
    for (const auto& v : j[probes]) best = std::max(best, v.get<double>());
    EXPECT_EQ(j[peak].get<double>(), best) << peak;
  }
  for (const char* n : {"128", "512"}) EXPECT_GT(j["prefill_tokens_per_s"][n].get<double>(), 0.0);
  for (const char* b : {"1", "4", "16", "32"}) EXPECT_GT(j["decode_tokens_per_s"][b].get<double>(), 0.0);
  EXPECT_EQ(j["file_tensor_bytes"].get<uint64_t>(), plan_synthetic_model(preset("test-tiny"), TensorType::Q4_0, 1).n_bytes());
  EXPECT_GT(j["rss_after_load_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j["targets"].contains("resident_weights"));
}

}  // namespace
}  // namespace tessera
