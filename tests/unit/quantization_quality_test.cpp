// Quantized embedded model (stories260K) vs its F32 original on the shared corpus: the quality targets
// per precision, the calibration forward pass against the engine's, and the quantizer's bad-input errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "engine/offline_engine.h"
#include "eval/perplexity.h"
#include "kernels/lowbit.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "quantizer/calibration.h"
#include "quantizer/quantizer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using quant::Method;
using quant::QuantizeOptions;
using quant::WeightFormat;

// The shared corpus split by lines: the first four fifths to evaluate on, the last fifth to calibrate with (the
// split bench/quantization_report.sh makes), so calibrated methods never see the text they are measured on.
std::pair<std::string, std::string> corpus() {
  std::ifstream f(std::string(TESSERA_SHARED_DIR) + "/corpus/stories260K-samples.txt", std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line + "\n");
  const size_t n_eval = lines.size() - lines.size() / 5;
  std::pair<std::string, std::string> parts;
  for (size_t i = 0; i < lines.size(); ++i) (i < n_eval ? parts.first : parts.second) += lines[i];
  return parts;
}

class QuantizationQuality : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("tessera_quality_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    auto [eval, calibration] = corpus();
    text_ = new std::string(std::move(eval));
    calibration_ = new std::string(std::move(calibration));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete text_;
    delete calibration_;
  }

  static PerplexityOptions windows_of_256(int64_t n) {
    PerplexityOptions po;
    po.ctx = 256;
    po.max_windows = n;
    return po;
  }

  // Quantizes the embedded model and measures it against the F32 original on the first 16 windows of 256 of
  // the evaluation part.
  static PerplexityResult measure(const std::string& name, QuantizeOptions o) {
    if (text_->empty()) return {};
    const std::string path = (*dir_ / (name + ".gguf")).string();
    auto f32 = Model::load_embedded();
    if (o.method != Method::Rtn) o.calibration_text = *calibration_;
    quant::quantize_model(*f32, path, o);
    auto model = Model::load(path);
    ThreadPool pool(2);
    return evaluate_perplexity(model, f32, *text_, windows_of_256(16), pool);
  }

  static QuantizeOptions opts(WeightFormat f, Method m = Method::Rtn) {
    QuantizeOptions o;
    o.format = f;
    o.method = m;
    return o;
  }

  static fs::path* dir_;
  static std::string* text_;         // evaluation part
  static std::string* calibration_;  // calibration part
};
fs::path* QuantizationQuality::dir_ = nullptr;
std::string* QuantizationQuality::text_ = nullptr;
std::string* QuantizationQuality::calibration_ = nullptr;

TEST_F(QuantizationQuality, Int8WithinOnePercentAnd98PercentTop1) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  const auto r = measure("int8", opts(WeightFormat::Int8));
  EXPECT_LT(r.ppl_ratio, 1.01);
  EXPECT_GE(r.top1_agreement, 0.98);
}

TEST_F(QuantizationQuality, Int8KvCacheWithinOnePercentOfF16Kv) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  auto model = Model::load_embedded();
  ThreadPool pool(2);
  PerplexityOptions po = windows_of_256(16);
  po.kv_type = KvType::I8;
  po.ref_kv_type = KvType::F16;  // the same weights: only the KV cache storage differs
  const auto r = evaluate_perplexity(model, model, *text_, po, pool);
  EXPECT_LT(r.ppl_ratio, 1.01);
  EXPECT_GT(r.kl_mean, 0.0) << "the INT8 cache should differ from the F16 one at all";
}

TEST_F(QuantizationQuality, Fp8WithinTwoPercent) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  const auto r = measure("fp8", opts(WeightFormat::Fp8));
  EXPECT_LT(r.ppl_ratio, 1.02);
}

TEST_F(QuantizationQuality, CalibratedInt4WithinFivePercentAndBetterThanRtn) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  const auto rtn = measure("int4_rtn", opts(WeightFormat::Int4));
  const auto gptq = measure("int4_gptq", opts(WeightFormat::Int4, Method::Gptq));
  EXPECT_LT(gptq.ppl_ratio, 1.05);
  EXPECT_LT(gptq.perplexity, rtn.perplexity * 0.99) << "RTN " << rtn.perplexity << ", GPTQ " << gptq.perplexity;
  EXPECT_LT(gptq.kl_mean, rtn.kl_mean);
}

// AWQ (scales chosen with the per-group clipping search in the loop), calibrated on text it is not evaluated on;
// measured 3.576 vs RTN 3.644 on these windows.
TEST_F(QuantizationQuality, AwqBetterThanRtn) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  const auto rtn = measure("int4_rtn_for_awq", opts(WeightFormat::Int4));
  const auto awq = measure("int4_awq", opts(WeightFormat::Int4, Method::Awq));
  EXPECT_LT(awq.perplexity, rtn.perplexity * 0.99) << "RTN " << rtn.perplexity << ", AWQ " << awq.perplexity;
  EXPECT_LT(awq.kl_mean, rtn.kl_mean * 0.9) << "RTN " << rtn.kl_mean << ", AWQ " << awq.kl_mean;
}

// stories260K with outlier channels injected without changing its fp32 function: the RMSNorm gains of a few
// channels ×k and the matching input columns of q/k/v and gate/up ÷k (LLMs grow such channels in training;
// this tiny model has almost none). Linear layers in Tessera's INT8 unless `int8` is false; the output stays F32
// as `tessera quantize` leaves it.
std::shared_ptr<Model> with_outlier_channels(const Model& base, float k, bool int8, const LoadOptions& options) {
  struct Storage {
    std::vector<std::vector<float>> floats;
    std::vector<std::vector<uint8_t>> bytes;
  };
  auto storage = std::make_shared<Storage>();
  const ModelConfig& c = base.config();
  ModelWeights w = base.weights();
  const std::vector<int64_t> channels = {3, 17, 42, 60};
  auto boosted_norm = [&](const float* gain) {
    storage->floats.emplace_back(gain, gain + c.n_embd);
    for (int64_t ch : channels) storage->floats.back()[size_t(ch)] *= k;
    return storage->floats.back().data();
  };
  auto rebuild = [&](WeightMatrix& m, bool shrink_channels) {
    std::vector<float> f(size_t(m.n_out * m.n_in));
    for (int64_t r = 0; r < m.n_out; ++r) {
      dequantize_weight_row(m, r, &f[size_t(r * m.n_in)]);
      if (shrink_channels)
        for (int64_t ch : channels) f[size_t(r * m.n_in + ch)] /= k;
    }
    WeightMatrix out = m;
    if (!int8) {
      storage->floats.push_back(std::move(f));
      out.type = TensorType::F32;
      out.data = reinterpret_cast<const uint8_t*>(storage->floats.back().data());
      out.row_bytes = size_t(m.n_in) * 4;
      out.row_scales = nullptr;
    } else {
      storage->bytes.emplace_back(size_t(m.n_out * m.n_in));
      storage->floats.emplace_back(size_t(m.n_out));
      for (int64_t r = 0; r < m.n_out; ++r)
        quantize_row(TensorType::I8, &f[size_t(r * m.n_in)], &storage->bytes.back()[size_t(r * m.n_in)], m.n_in,
                     &storage->floats.back()[size_t(r)]);
      out.type = TensorType::I8;
      out.data = storage->bytes.back().data();
      out.row_bytes = size_t(m.n_in);
      out.row_scales = storage->floats.back().data();
    }
    m = out;
  };
  for (LayerWeights& L : w.layers) {
    L.attn_norm = boosted_norm(L.attn_norm);
    L.ffn_norm = boosted_norm(L.ffn_norm);
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.w_gate, &L.w_up}) rebuild(*m, true);
    for (WeightMatrix* m : {&L.wo, &L.w_down}) rebuild(*m, false);
  }
  return Model::from_parts(c, w, base.tokenizer_ptr(), storage, options);
}

// What --int8-threshold is for: W8A8 with per-token scales loses the small activations of a token to the step its
// outliers set; computing the outliers in fp32 takes that error away (measured: KL 0.121 → 0.027). What stays is
// the weight side: the shrunk columns are stored at their row's int8 step and meet ×40 activations. LLM.int8()
// keeps those weight columns in fp16 as well; Tessera's INT8 file has only the int8 rows.
TEST_F(QuantizationQuality, Int8ThresholdRecoversInjectedOutlierChannels) {
  if (text_->empty()) GTEST_SKIP() << "no corpus in " << TESSERA_SHARED_DIR;
  auto f32 = Model::load_embedded();
  ThreadPool pool(2);
  auto kl = [&](std::shared_ptr<const Model> m) {
    return evaluate_perplexity(m, f32, *text_, windows_of_256(8), pool).kl_mean;
  };
  LoadOptions on;
  on.int8_threshold = 6.0f;
  const double exact = kl(with_outlier_channels(*f32, 40.0f, false, {}));  // fp32 rounding only
  const double plain = kl(with_outlier_channels(*f32, 40.0f, true, {}));
  const double mixed = kl(with_outlier_channels(*f32, 40.0f, true, on));
  const double base_int8 = kl(with_outlier_channels(*f32, 1.0f, true, {}));  // INT8, no outliers injected
  std::printf("KL vs F32 (8 windows of 256): fp32 with outlier channels %.6f, INT8 %.6f, INT8 --int8-threshold 6 "
              "%.6f; INT8 without injected outliers %.6f\n", exact, plain, mixed, base_int8);
  EXPECT_LT(exact, 1e-4);
  EXPECT_LT(mixed, plain / 3.0);
  EXPECT_GT(plain, base_int8 * 10.0) << "the injected channels should hurt plain W8A8";
}

// The calibration pass is a separate implementation of the forward pass: its logits must match the engine's.
TEST(Calibration, CaptureForwardMatchesEngine) {
  auto model = Model::load_embedded();
  ThreadPool pool(2);
  const std::vector<int32_t> tokens = model->tokenizer().encode("Once upon a time, there was a little dog.", true);
  OfflineEngine gen(model, pool, 64);
  const std::vector<float> want = gen.prompt_logits(tokens);
  const std::vector<float> got = quant::capture_forward(*model, tokens, nullptr, pool);
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
  EXPECT_LT(max_diff, 1e-3);
}

TEST(QuantizeErrors, BadInputFailsClearlyAndLeavesNoFile) {
  auto model = Model::load_embedded();
  const fs::path dir = fs::temp_directory_path() / ("tessera_qerr_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "out.gguf").string();
  auto expect_error = [&](QuantizeOptions o, const std::string& what, const std::string& path) {
    try {
      quant::quantize_model(*model, path, o);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(path));
  };
  QuantizeOptions o;
  o.format = WeightFormat::Int4;
  o.group_size = 48;
  expect_error(o, "group size 48", out);
  o.group_size = 32;
  o.method = Method::Awq;
  expect_error(o, "calibration text", out);
  o.calibration_text = "   \n";
  expect_error(o, "empty", out);
  o.calibration_text = "Once upon a time.";
  expect_error(o, "too short", out);
  o.method = Method::Rtn;
  expect_error(o, "cannot write", (dir / "missing" / "out.gguf").string());
  // A quantized model is not a valid source.
  QuantizeOptions int8;
  int8.format = WeightFormat::Int8;
  const std::string q8 = (dir / "int8.gguf").string();
  quant::quantize_model(*model, q8, int8);
  auto quantized = Model::load(q8);
  try {
    quant::quantize_model(*quantized, out, o);
    ADD_FAILURE() << "re-quantizing an I8 model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantize from an F32, F16 or BF16 model"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  size_t leftovers = 0;
  for (const auto& entry : fs::directory_iterator(dir)) leftovers += entry.path().filename() != "int8.gguf";
  EXPECT_EQ(leftovers, 0u) << "temporary files left in " << dir;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
