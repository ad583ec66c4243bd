// Reference matmul: dequantize a weight row, then a sequential fp32 dot product per token. The fixed reduction
// order per output element is what makes results batch-invariant.
#include "kernels/matmul.h"

#include <vector>

#include "kernels/quant.h"

namespace tessera {

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  pool.parallel_for(w.n_out, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(w.n_in));
    for (int64_t o = begin; o < end; ++o) {
      dequantize_row(w.type, w.row(o), row.data(), w.n_in, w.row_scales ? w.row_scales[o] : 1.0f);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.n_in;
        float sum = 0.0f;
        for (int64_t i = 0; i < w.n_in; ++i) sum += row[i] * xt[i];
        y[t * w.n_out + o] = sum;
      }
    }
  });
}

}  // namespace tessera
