#include "kernels/interleave.h"

#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/weight_types.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

// One row's share of a block: its fp16 scale bytes (Q4_0, Q8_0 and Q6_K; kept as 8 runs in row order at the
// start of the interleaved block) and where the row stores them, its total bytes and the values it holds; the
// rest moves in 4-byte units (Q6_K's values are then repacked, pack_q6_k_values). I8's scales are per row,
// outside the data; Q4_K's scales move with its units. 0 bytes for types that do not interleave.
struct BlockShape {
  size_t bytes = 0;
  size_t scale_bytes = 0;
  int64_t values = 32;
  size_t scale_offset = 0;

  size_t payload_offset() const { return scale_offset == 0 ? scale_bytes : 0; }
};

BlockShape block_shape(TensorType type) {
  switch (type) {
    case TensorType::Q4_0: return {18, 2, 32, 0};
    case TensorType::Q8_0: return {34, 2, 32, 0};
    case TensorType::I8: return {32, 0, 32, 0};
    case TensorType::Q4_K: return {144, 0, 256, 0};
    case TensorType::Q6_K: return {210, 2, 256, 208};
    default: return {};
  }
}

// The 48 value vectors of one interleaved Q6_K block (8 rows), rewritten from ql/qh units (as the generic
// interleave moved them: V0..V31 ql, V32..V47 qh) to packed values. Value vector 8b + u, b = 4n + Q, holds values
// 32b + 4u..+3 of the 8 rows: the ql nibble Q / 2 of vector 16n + 8(Q % 2) + u and bits 2Q, 2Q + 1 of qh vector
// 32 + 8n + u. Whole 32-byte vectors at a time (loops the compiler vectorizes): loading a model repacks every
// Q6_K block.
void pack_q6_k_values(uint8_t* vectors) {
  uint8_t w[64][32];
  for (int v = 0; v < 64; ++v) {
    const int b = v / 8, u = v % 8, n = b / 4, quarter = b % 4;
    const uint8_t* ql = vectors + 32 * (16 * n + 8 * (quarter % 2) + u);
    const uint8_t* qh = vectors + 32 * (32 + 8 * n + u);
    const int nibble = quarter < 2 ? 0 : 4, bits = 2 * quarter;
    for (int e = 0; e < 32; ++e) w[v][e] = uint8_t(((ql[e] >> nibble) & 0x0f) | ((qh[e] >> bits) & 3) << 4);
  }
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 3; ++j)
      for (int e = 0; e < 32; ++e)
        vectors[32 * (3 * k + j) + e] = uint8_t(w[4 * k + j][e] | ((w[4 * k + 3][e] >> (2 * j)) & 3) << 6);
}

// Row l's ql and qh (the first 192 bytes of its block) from one interleaved block's packed value vectors.
void unpack_q6_k_row(const uint8_t* vectors, int l, uint8_t* block) {
  uint8_t q[256];
  for (int k = 0; k < 16; ++k) {
    for (int i = 0; i < 4; ++i) {
      uint8_t fourth = 0;
      for (int j = 0; j < 3; ++j) {
        const uint8_t b = vectors[32 * (3 * k + j) + 4 * l + i];
        q[16 * k + 4 * j + i] = b & 0x3f;
        fourth = uint8_t(fourth | (b >> 6) << (2 * j));
      }
      q[16 * k + 12 + i] = fourth;
    }
  }
  store_q6_k_quants(q, block, block + 128);
}

// Bytes per element of the types with a panel kernel (core/weight_types.h), 0 for the others.
size_t panel_element_bytes(TensorType type) {
  const WeightTypeInfo* info = find_weight_type(type);
  return info != nullptr && info->panel_kernel ? info->traits.block_bytes : 0;
}

void panel_rows(uint8_t* data, int64_t n_out, int64_t n_in, size_t element) {
  const size_t row_bytes = size_t(n_in) * element;
  std::vector<uint8_t> rows(kPanelRows * row_bytes);  // one panel as stored
  for (int64_t p = 0; p < n_out / kPanelRows; ++p) {
    uint8_t* panel = data + size_t(p) * kPanelRows * row_bytes;
    std::memcpy(rows.data(), panel, rows.size());
    for (int64_t k = 0; k < n_in; ++k) {
      uint8_t* slice = panel + size_t(k) * kPanelRows * element;
      for (int l = 0; l < kPanelRows; ++l) std::memcpy(slice + l * element, rows.data() + l * row_bytes + k * element, element);
    }
  }
}

// Where a BF16 panel in pair order stores row l's value k: in the pair word of k's pair (k even in its low
// half, x86 being little-endian), or an odd n_in's last k in its slice.
size_t pair_order_offset(int64_t n_in, int64_t k, int64_t l) {
  if (k < (n_in & ~int64_t(1))) return size_t(k / 2) * kPanelRows * 4 + size_t(l) * 4 + size_t(k % 2) * 2;
  return size_t(k) * kPanelRows * 2 + size_t(l) * 2;
}

}  // namespace

WeightLayout interleaved_layout(TensorType type) {
  return panel_element_bytes(type) != 0 ? WeightLayout::Panel32 : WeightLayout::Interleaved8;
}

bool can_interleave(const WeightMatrix& w) {
  if (const size_t element = panel_element_bytes(w.type)) {
    return w.layout == WeightLayout::Rows && w.n_out > 0 && w.n_out % kPanelRows == 0 &&
           w.row_bytes == size_t(w.n_in) * element;
  }
  const BlockShape shape = block_shape(w.type);
  return shape.bytes != 0 && w.layout == WeightLayout::Rows && w.n_out > 0 && w.n_out % kInterleaveRows == 0 &&
         w.n_in % shape.values == 0 && w.row_bytes == size_t(w.n_in / shape.values) * shape.bytes &&
         w.outlier_threshold == 0.0f;
}

void interleave_rows(TensorType type, uint8_t* data, int64_t n_out, int64_t n_in) {
  if (const size_t element = panel_element_bytes(type)) {
    TESSERA_CHECK(n_out % kPanelRows == 0);
    return panel_rows(data, n_out, n_in, element);
  }
  const BlockShape shape = block_shape(type);
  const size_t bytes = shape.bytes, scale_bytes = shape.scale_bytes, payload = bytes - scale_bytes;
  const size_t scale_at = shape.scale_offset, payload_at = shape.payload_offset();
  TESSERA_CHECK(bytes != 0 && n_out % kInterleaveRows == 0 && n_in % shape.values == 0);
  const size_t nb = size_t(n_in / shape.values), row_bytes = nb * bytes;
  std::vector<uint8_t> rows(kInterleaveRows * row_bytes);  // one group as stored
  for (int64_t g = 0; g < n_out / kInterleaveRows; ++g) {
    uint8_t* group = data + size_t(g) * kInterleaveRows * row_bytes;
    std::memcpy(rows.data(), group, rows.size());
    for (size_t b = 0; b < nb; ++b) {
      uint8_t* out = group + b * kInterleaveRows * bytes;
      uint8_t* vectors = out + kInterleaveRows * scale_bytes;
      for (int l = 0; l < kInterleaveRows; ++l) {
        const uint8_t* block = rows.data() + size_t(l) * row_bytes + b * bytes;
        std::memcpy(out + scale_bytes * l, block + scale_at, scale_bytes);
        for (size_t j = 0; j < payload / 4; ++j) std::memcpy(vectors + 32 * j + 4 * l, block + payload_at + 4 * j, 4);
      }
      if (type == TensorType::Q6_K) pack_q6_k_values(vectors);
    }
  }
}

void deinterleave_row(const WeightMatrix& w, int64_t r, uint8_t* dst) {
  if (const size_t element = panel_element_bytes(w.type)) {
    TESSERA_CHECK(w.layout == WeightLayout::Panel32 && r >= 0 && r < w.n_out);
    const uint8_t* panel = w.data + size_t(r / kPanelRows) * kPanelRows * w.row_bytes;
    const int64_t l = r % kPanelRows;
    for (int64_t k = 0; k < w.n_in; ++k) {
      const size_t at = w.pair_order() ? pair_order_offset(w.n_in, k, l) : size_t(k * kPanelRows + l) * element;
      std::memcpy(dst + k * element, panel + at, element);
    }
    return;
  }
  const BlockShape shape = block_shape(w.type);
  const size_t bytes = shape.bytes, scale_bytes = shape.scale_bytes, payload = bytes - scale_bytes;
  const size_t scale_at = shape.scale_offset, payload_at = shape.payload_offset();
  TESSERA_CHECK(bytes != 0 && w.layout == WeightLayout::Interleaved8 && r >= 0 && r < w.n_out);
  const size_t nb = size_t(w.n_in / shape.values);
  const int l = int(r % kInterleaveRows);
  const uint8_t* group = w.data + size_t(r / kInterleaveRows) * kInterleaveRows * w.row_bytes;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* in = group + b * kInterleaveRows * bytes;
    const uint8_t* vectors = in + kInterleaveRows * scale_bytes;
    uint8_t* block = dst + b * bytes;
    std::memcpy(block + scale_at, in + scale_bytes * l, scale_bytes);
    for (size_t j = 0; j < payload / 4; ++j) std::memcpy(block + payload_at + 4 * j, vectors + 32 * j + 4 * l, 4);
    if (w.type == TensorType::Q6_K) unpack_q6_k_row(vectors, l, block);
  }
}

void round_f16_to_bf16(uint8_t* data, size_t n) {
  if (active_isa() >= Isa::Avx512Bf16) return kernels::avx512::round_f16_to_bf16(data, n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    h = fp32_to_bf16(fp16_to_fp32(h));
    std::memcpy(data + 2 * i, &h, 2);
  }
}

void pair_bf16_panels(uint8_t* data, int64_t n_out, int64_t n_in) {
  TESSERA_CHECK(n_out % kPanelRows == 0);
  const size_t panel_bytes = size_t(kPanelRows) * size_t(n_in) * 2;
  std::vector<uint16_t> slices(panel_bytes / 2);  // one panel in slice order
  // Whole pairs at a time, in loops the compiler vectorizes (every BF16 matrix with bf16 products passes here at
  // load). An odd n_in's last slice lies at the same bytes in both orders and stays.
  for (int64_t p = 0; p < n_out / kPanelRows; ++p) {
    uint8_t* panel = data + size_t(p) * panel_bytes;
    std::memcpy(slices.data(), panel, panel_bytes);
    for (int64_t q = 0; q < n_in / 2; ++q) {
      const uint16_t* even = &slices[size_t(2 * q * kPanelRows)];
      const uint16_t* odd = even + kPanelRows;
      uint32_t words[kPanelRows];
      for (int l = 0; l < kPanelRows; ++l) words[l] = uint32_t(even[l]) | uint32_t(odd[l]) << 16;
      std::memcpy(panel + size_t(q) * sizeof(words), words, sizeof(words));
    }
  }
}

}  // namespace tessera
