// Calibration for weight quantization: runs the fp32 model over sample text and collects, for the input of
// every linear layer, per-channel mean |x| (AWQ) and the Hessian XᵀX (GPTQ).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"

namespace tessera::quant {

// The four distinct linear-layer inputs of a Llama block; the matrices that read each one.
enum class LinearInput : int {
  AttnIn = 0,  // attn_norm output → attn_q, attn_k, attn_v
  AttnOut,     // attention output → attn_output
  FfnIn,       // ffn_norm output → ffn_gate, ffn_up
  FfnMid,      // silu(gate) · up → ffn_down
};
constexpr int kLinearInputs = 4;

// Statistics of one input of width n.
struct InputStats {
  int64_t n = 0;
  int64_t n_tokens = 0;
  std::vector<double> abs_sum;  // [n] Σ|x_j|
  std::vector<double> hessian;  // [n, n] Σ x xᵀ (GPTQ's H up to a factor); empty unless requested

  std::vector<float> mean_abs() const;
  std::vector<float> hessian_f32() const;  // Σ x xᵀ / n_tokens
};

struct CalibrationStats {
  std::vector<std::array<InputStats, kLinearInputs>> layers;  // [n_layer]
  int64_t n_tokens = 0;
  int64_t n_samples = 0;
};

struct CalibrationOptions {
  int64_t n_samples = 8;        // windows of the text
  int64_t sample_tokens = 256;  // tokens per window, BOS included (capped by the training context)
  bool hessian = true;          // also accumulate XᵀX (n² per input: only for small models)
};

// Tokenizes `text` (BOS + text), cuts it into up to n_samples windows and runs them. Throws tessera::Error for an
// empty text or one too short to calibrate with (fewer than kMinCalibrationTokens tokens).
constexpr int64_t kMinCalibrationTokens = 64;
CalibrationStats calibrate(const Model& model, const std::string& text, const CalibrationOptions& options,
                           ThreadPool& pool);

// The fp32 forward pass of one sequence that calibrate() runs, exposed for tests: returns the logits
// [tokens.size(), n_vocab] and, when `stats` is non-null, adds the linear-layer inputs to it.
std::vector<float> capture_forward(const Model& model, const std::vector<int32_t>& tokens, CalibrationStats* stats,
                                   ThreadPool& pool);

}  // namespace tessera::quant
