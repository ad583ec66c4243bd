#include "kernels/interleave.h"

#include <cstring>
#include <vector>

#include "core/check.h"

namespace tessera {
namespace {

constexpr size_t kQ4_0BlockBytes = 18;                                       // fp16 scale + 16 nibble bytes
constexpr size_t kGroupBlockBytes = kInterleaveRows * kQ4_0BlockBytes;       // 144
constexpr size_t kNibbleOffset = kInterleaveRows * 2;                        // after the 8 scales

}  // namespace

bool can_interleave_q4_0(const WeightMatrix& w) {
  return w.type == TensorType::Q4_0 && w.layout == WeightLayout::Rows && w.n_out > 0 &&
         w.n_out % kInterleaveRows == 0 && w.n_in % 32 == 0 && w.row_bytes == size_t(w.n_in / 32) * kQ4_0BlockBytes;
}

void interleave_q4_0(uint8_t* data, int64_t n_out, int64_t n_in) {
  TESSERA_CHECK(n_out % kInterleaveRows == 0 && n_in % 32 == 0);
  const size_t nb = size_t(n_in / 32), row_bytes = nb * kQ4_0BlockBytes;
  std::vector<uint8_t> rows(kInterleaveRows * row_bytes);  // one group as stored
  for (int64_t g = 0; g < n_out / kInterleaveRows; ++g) {
    uint8_t* group = data + size_t(g) * kInterleaveRows * row_bytes;
    std::memcpy(rows.data(), group, rows.size());
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* out = group + b * kGroupBlockBytes;
      for (int l = 0; l < kInterleaveRows; ++l) {
        const uint8_t* block = rows.data() + size_t(l) * row_bytes + b * kQ4_0BlockBytes;
        std::memcpy(out + 2 * l, block, 2);
        for (int j = 0; j < 4; ++j) std::memcpy(out + kNibbleOffset + 32 * j + 4 * l, block + 2 + 4 * j, 4);
      }
    }
  }
}

void deinterleave_q4_0_row(const WeightMatrix& w, int64_t r, uint8_t* dst) {
  TESSERA_CHECK(w.layout == WeightLayout::Q4_0x8 && r >= 0 && r < w.n_out);
  const size_t nb = size_t(w.n_in / 32);
  const int l = int(r % kInterleaveRows);
  const uint8_t* group = w.data + size_t(r / kInterleaveRows) * kInterleaveRows * w.row_bytes;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* in = group + b * kGroupBlockBytes;
    uint8_t* block = dst + b * kQ4_0BlockBytes;
    std::memcpy(block, in + 2 * l, 2);
    for (int j = 0; j < 4; ++j) std::memcpy(block + 2 + 4 * j, in + kNibbleOffset + 32 * j + 4 * l, 4);
  }
}

}  // namespace tessera
