// How much each integer weight type's matmul loses to the quantization of its activations, beside what its
// weights lose: the relative RMS error of matmul's outputs against the fp32 product with the dequantized weights
// (activations alone) and with the original fp32 weights (everything), on normal activations and on the same
// with every 409th channel 30 times larger (5 of 2048: the outlier channels of real models' hidden states). The
// activation formats differ by type (one scale per 32 values for Q8_0, Q4_0 and Q6_K, per 256 for Q4_K, per
// token for I8), and this is what that choice costs. Each type is measured in rows and interleaved in groups of 8
// rows (x8: the layout models load, kernels/interleave.h), whose kernels take the same activations by other
// steps. Deterministic (fixed seeds); a measurement, not a timing.
//
//   build/bench/activation_error_bench [n_in] [n_out] [tokens]   (defaults 2048 512 16)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace {

using namespace tessera;

struct Weights {
  std::vector<uint8_t> data;
  std::vector<float> row_scales;
  WeightMatrix view;
};

// `values` [n_out, n_in] quantized row by row to `type` (F32: kept as they are).
Weights quantize_weights(TensorType type, const std::vector<float>& values, int64_t n_out, int64_t n_in) {
  Weights w;
  const size_t row_bytes = tensor_row_bytes(type, static_cast<uint64_t>(n_in));
  w.data.resize(row_bytes * static_cast<size_t>(n_out));
  w.row_scales.assign(static_cast<size_t>(n_out), 1.0f);
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(type, values.data() + r * n_in, w.data.data() + static_cast<size_t>(r) * row_bytes, n_in,
                 &w.row_scales[static_cast<size_t>(r)]);
  }
  w.view.type = type;
  w.view.n_out = n_out;
  w.view.n_in = n_in;
  w.view.data = w.data.data();
  w.view.row_bytes = row_bytes;
  w.view.row_scales = type == TensorType::I8 ? w.row_scales.data() : nullptr;
  return w;
}

// The same interleaved in groups of 8 rows, as a model load lays out a matrix whose rows allow it.
Weights interleave(Weights w) {
  interleave_rows(w.view.type, w.data.data(), w.view.n_out, w.view.n_in);
  w.view.data = w.data.data();
  w.view.row_scales = w.view.type == TensorType::I8 ? w.row_scales.data() : nullptr;
  w.view.layout = interleaved_layout(w.view.type);
  return w;
}

double relative_rms(const std::vector<float>& y, const std::vector<float>& ref) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    err += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return std::sqrt(err / norm);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n_in = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int64_t n_out = argc > 2 ? std::atoll(argv[2]) : 512;
  const int64_t n_tokens = argc > 3 ? std::atoll(argv[3]) : 16;
  if (n_in <= 0 || n_in % 256 != 0 || n_out <= 0 || n_out % 8 != 0 || n_tokens <= 0) {
    std::fprintf(stderr, "usage: %s [n_in, a multiple of 256] [n_out, a multiple of 8] [tokens]\n", argv[0]);
    return 2;
  }
  ThreadPool pool(2);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n_out * n_in));
  for (float& v : values) v = 0.5f * normal(rng);
  const Weights f32 = quantize_weights(TensorType::F32, values, n_out, n_in);

  std::printf("%lld x %lld, %lld tokens, ISA %s: relative RMS error of the outputs, %%\n", (long long)n_out,
              (long long)n_in, (long long)n_tokens, std::string(isa_name(active_isa())).c_str());
  std::printf("%-7s | %-35s | %s\n", "type", "normal activations", "every 409th channel x30");
  std::printf("%-7s | %-16s %-18s | %-16s %s\n", "", "activations", "all (fp32 weights)", "activations",
              "all (fp32 weights)");
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::I8}) {
    for (const bool interleaved : {false, true}) {
      Weights w = quantize_weights(type, values, n_out, n_in);
      if (interleaved) w = interleave(std::move(w));
      std::printf("%-7s |", (std::string(tensor_type_name(type)) + (interleaved ? "x8" : "")).c_str());
      for (const bool outliers : {false, true}) {
        std::mt19937 x_rng(5);
        std::normal_distribution<float> x_normal(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
        for (float& v : x) v = x_normal(x_rng);
        if (outliers) {
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t c = 17; c < n_in; c += 409) x[static_cast<size_t>(t * n_in + c)] *= 30.0f;
          }
        }
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out)), y_dequantized(y.size()), y_f32(y.size());
        matmul(w.view, x.data(), n_tokens, y.data(), pool);
        matmul_reference(w.view, x.data(), n_tokens, y_dequantized.data(), pool);
        matmul_reference(f32.view, x.data(), n_tokens, y_f32.data(), pool);
        std::printf(" %-16.3f %-17.3f%s", 100.0 * relative_rms(y, y_dequantized), 100.0 * relative_rms(y, y_f32),
                    outliers ? "" : " |");
      }
      std::printf("\n");
    }
  }
  return 0;
}
