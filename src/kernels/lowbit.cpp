// Scalar reference of the FP8 E4M3 and INT4 group-wise formats (see lowbit.h); the kernels are tested
// against these.
#include "kernels/lowbit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/interleave.h"
#include "kernels/quant.h"

namespace tessera {

float quantize_row_fp8(const float* x, int64_t n, uint8_t* dst) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / kE4M3Max;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp8_e4m3(x[i] * inv);
  return scale;
}

void dequantize_row_fp8(const uint8_t* src, int64_t n, float scale, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_fp32(src[i]) * scale;
}

Int4Group int4_fit_group(const float* x, int64_t n) {
  float lo = x[0], hi = x[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  return int4_fit_range(lo, hi);
}

Int4Group int4_fit_range(float lo, float hi) {
  if (!(hi > lo)) {  // a constant group: widen to include 0 so that the constant is an end of the range
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
  }
  Int4Group g;
  if (!(hi > lo)) return g;  // all zero
  g.scale = fp16_to_fp32(fp32_to_fp16((hi - lo) / 15.0f));
  if (g.scale == 0.0f) return g;
  g.zero = fp16_to_fp32(fp32_to_fp16(-lo / g.scale));
  return g;
}

void int4_set(uint8_t* row, int64_t i, int q) {
  const int64_t c = i / kInt4Chunk, j = i % kInt4Chunk;
  uint8_t& b = row[c * 16 + (j & 15)];
  b = static_cast<uint8_t>(j < 16 ? (b & 0xF0) | q : (b & 0x0F) | (q << 4));
}

int int4_get(const uint8_t* row, int64_t i) {
  const int64_t c = i / kInt4Chunk, j = i % kInt4Chunk;
  const uint8_t b = row[c * 16 + (j & 15)];
  return j < 16 ? (b & 0xF) : (b >> 4);
}

void quantize_row_int4(const float* x, int64_t n, int64_t group, uint8_t* dst, uint16_t* scales, uint16_t* zeros) {
  if (!is_valid_int4_group(group)) fail("INT4 group size {} is not a positive multiple of 32", group);
  std::memset(dst, 0, int4_row_bytes(n));
  for (int64_t g = 0, begin = 0; begin < n; ++g, begin += group) {
    const int64_t len = std::min(group, n - begin);
    const Int4Group p = int4_fit_group(x + begin, len);
    scales[g] = fp32_to_fp16(p.scale);
    zeros[g] = fp32_to_fp16(p.zero);
    for (int64_t i = begin; i < begin + len; ++i) int4_set(dst, i, int4_quantize_value(x[i], p));
  }
}

void dequantize_row_int4(const uint8_t* src, int64_t n, int64_t group, const uint16_t* scales,
                         const uint16_t* zeros, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = i / group;
    dst[i] = int4_dequantize_value(int4_get(src, i), {fp16_to_fp32(scales[g]), fp16_to_fp32(zeros[g])});
  }
}

void dequantize_weight_row(const WeightMatrix& w, int64_t r, float* dst) {
  switch (w.type) {
    case TensorType::INT4: {
      const int64_t ng = w.n_groups();
      dequantize_row_int4(w.row(r), w.n_in, w.group_size, w.group_scales + r * ng, w.group_zeros + r * ng, dst);
      return;
    }
    default: {
      const uint8_t* src = w.row(r);
      if (w.layout != WeightLayout::Rows) {
        thread_local std::vector<uint8_t> row;
        if (row.size() < w.row_bytes) row.resize(w.row_bytes);
        deinterleave_row(w, r, row.data());
        src = row.data();
      }
      if (w.type == TensorType::FP8_E4M3) return dequantize_row_fp8(src, w.n_in, w.row_scales[r], dst);
      dequantize_row(w.type, src, dst, w.n_in, w.row_scales ? w.row_scales[r] : 1.0f);
    }
  }
}

}  // namespace tessera
