// Linear layers: y = x · Wᵀ for a batch of tokens, for every supported weight type.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace tessera {

// x: [n_tokens, w.n_in] fp32, y: [n_tokens, w.n_out] fp32.
// Batch invariance (a contract the batching engine relies on): y[t, o] is bit-identical whatever n_tokens is,
// whichever other rows x holds, and however the work is split across the pool's threads.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace tessera
