#include "kernels/interleave.h"

#include <cstring>
#include <vector>

#include "core/check.h"

namespace tessera {
namespace {

constexpr size_t kScaleBytes = 2;  // each block starts with its fp16 scale

// Bytes of one block: 18 (Q4_0) or 34 (Q8_0); 0 for types that do not interleave.
size_t block_bytes(TensorType type) {
  return type == TensorType::Q4_0 ? 18 : type == TensorType::Q8_0 ? 34 : 0;
}

}  // namespace

bool can_interleave(const WeightMatrix& w) {
  const size_t bytes = block_bytes(w.type);
  return bytes != 0 && w.layout == WeightLayout::Rows && w.n_out > 0 && w.n_out % kInterleaveRows == 0 &&
         w.n_in % 32 == 0 && w.row_bytes == size_t(w.n_in / 32) * bytes;
}

void interleave_rows(TensorType type, uint8_t* data, int64_t n_out, int64_t n_in) {
  const size_t bytes = block_bytes(type), payload = bytes - kScaleBytes;
  TESSERA_CHECK(bytes != 0 && n_out % kInterleaveRows == 0 && n_in % 32 == 0);
  const size_t nb = size_t(n_in / 32), row_bytes = nb * bytes;
  std::vector<uint8_t> rows(kInterleaveRows * row_bytes);  // one group as stored
  for (int64_t g = 0; g < n_out / kInterleaveRows; ++g) {
    uint8_t* group = data + size_t(g) * kInterleaveRows * row_bytes;
    std::memcpy(rows.data(), group, rows.size());
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* out = group + b * kInterleaveRows * bytes;
      uint8_t* vectors = out + kInterleaveRows * kScaleBytes;
      for (int l = 0; l < kInterleaveRows; ++l) {
        const uint8_t* block = rows.data() + size_t(l) * row_bytes + b * bytes;
        std::memcpy(out + kScaleBytes * l, block, kScaleBytes);
        for (size_t j = 0; j < payload / 4; ++j) std::memcpy(vectors + 32 * j + 4 * l, block + kScaleBytes + 4 * j, 4);
      }
    }
  }
}

void deinterleave_row(const WeightMatrix& w, int64_t r, uint8_t* dst) {
  const size_t bytes = block_bytes(w.type), payload = bytes - kScaleBytes;
  TESSERA_CHECK(bytes != 0 && w.layout == WeightLayout::Interleaved8 && r >= 0 && r < w.n_out);
  const size_t nb = size_t(w.n_in / 32);
  const int l = int(r % kInterleaveRows);
  const uint8_t* group = w.data + size_t(r / kInterleaveRows) * kInterleaveRows * w.row_bytes;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* in = group + b * kInterleaveRows * bytes;
    const uint8_t* vectors = in + kInterleaveRows * kScaleBytes;
    uint8_t* block = dst + b * bytes;
    std::memcpy(block, in + kScaleBytes * l, kScaleBytes);
    for (size_t j = 0; j < payload / 4; ++j) std::memcpy(block + kScaleBytes + 4 * j, vectors + 32 * j + 4 * l, 4);
  }
}

}  // namespace tessera
