// Reference encodings of the weight types. These scalar routines define the formats; SIMD kernels are tested
// against them.
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "core/weight_types.h"
#include "kernels/lowbit.h"

namespace tessera {
namespace {

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // 8 six-bit scales and 8 six-bit mins, packed
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  uint8_t ql[128];  // low 4 bits
  uint8_t qh[64];   // high 2 bits
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

void q4k_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void dequantize_q4_k(const BlockQ4_K* blocks, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    const float dmin = fp16_to_fp32(blk.dmin);
    const uint8_t* q = blk.qs;
    for (int j = 0; j < 256; j += 64) {
      const int is = j / 32;
      uint8_t sc, m;
      q4k_scale_min(is, blk.scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4k_scale_min(is + 1, blk.scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* blocks, float* y, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    const uint8_t* ql = blk.ql;
    const uint8_t* qh = blk.qh;
    const int8_t* sc = blk.scales;
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

// Best (scale, offset) for value ≈ scale·q − offset with q in [0, 15] and offset ≥ 0 (Q4_K can only shift
// down), by least squares over a few candidate ranges: the full [min(0, lo), hi] range first, then shrunk ones
// that clip outliers when that lowers the squared error of the whole sub-block.
void fit_scale_min_4bit(const float* x, int n, float* scale, float* offset) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *scale = 0.0f;
  *offset = -lo;
  if (hi <= lo) return;
  float best_err = std::numeric_limits<float>::infinity();
  for (int step = 0; step <= 12; ++step) {
    const float range = (hi - lo) * (1.0f - 0.02f * static_cast<float>(step));
    const float s0 = range / 15.0f;
    // Quantize with this range, then solve the 2×2 least-squares problem for scale and offset given q.
    float sq = 0, sqq = 0, sx = 0, sxq = 0;
    uint8_t q[32];
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lrintf((x[i] - lo) / s0)), 0, 15));
      sq += q[i];
      sqq += static_cast<float>(q[i]) * q[i];
      sx += x[i];
      sxq += x[i] * q[i];
    }
    const float det = n * sqq - sq * sq;
    float s = s0, off = -lo;
    if (det > 0.0f) {
      s = (n * sxq - sq * sx) / det;
      off = (s * sq - sx) / n;
    }
    if (off < 0.0f || s <= 0.0f) {  // the offset must stay ≥ 0: refit the scale alone with offset 0
      off = 0.0f;
      s = sqq > 0.0f ? sxq / sqq : s0;
      if (s <= 0.0f) continue;
    }
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int qi = std::clamp(static_cast<int>(std::lrintf((x[i] + off) / s)), 0, 15);
      const float e = s * qi - off - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      *scale = s;
      *offset = off;
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* blocks, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256) {
    float scale[8], offset[8], max_scale = 0.0f, max_offset = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit_scale_min_4bit(x + 32 * j, 32, &scale[j], &offset[j]);
      max_scale = std::max(max_scale, scale[j]);
      max_offset = std::max(max_offset, offset[j]);
    }
    BlockQ4_K& blk = blocks[b];
    blk.d = fp32_to_fp16(max_scale / 63.0f);
    blk.dmin = fp32_to_fp16(max_offset / 63.0f);
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0.0f ? static_cast<uint8_t>(std::clamp(static_cast<int>(std::lrintf(scale[j] / d)), 0, 63)) : 0;
      mn[j] = dmin > 0.0f ? static_cast<uint8_t>(std::clamp(static_cast<int>(std::lrintf(offset[j] / dmin)), 0, 63))
                          : 0;
    }
    for (int j = 0; j < 4; ++j) {
      blk.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      blk.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
      blk.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    // Re-quantize against the scales as they will be decoded.
    uint8_t q[256];
    for (int j = 0; j < 8; ++j) {
      const float s = d * sc[j], off = dmin * mn[j];
      for (int i = 0; i < 32; ++i) {
        const int v = s > 0.0f ? static_cast<int>(std::lrintf((x[32 * j + i] + off) / s)) : 0;
        q[32 * j + i] = static_cast<uint8_t>(std::clamp(v, 0, 15));
      }
    }
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) blk.qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
  }
}

// Best symmetric scale for value ≈ scale·q, q in [-32, 31]: the largest-magnitude value maps near -32 (the
// wider side), and a few nearby divisors are tried for the lowest squared error.
float fit_scale_6bit(const float* x, int n) {
  float max_value = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max_value = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best_scale = max_value / -32.0f, best_err = std::numeric_limits<float>::infinity();
  for (int step = -4; step <= 8; ++step) {
    const float s = max_value / (-32.0f + 0.5f * static_cast<float>(step));
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(static_cast<int>(std::lrintf(x[i] / s)), -32, 31);
      const float e = s * q - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_scale = s;
    }
  }
  return best_scale;
}

void quantize_q6_k(const float* x, BlockQ6_K* blocks, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256) {
    float scale[16], max_abs = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = fit_scale_6bit(x + 16 * j, 16);
      max_abs = std::max(max_abs, std::fabs(scale[j]));
    }
    BlockQ6_K& blk = blocks[b];
    blk.d = fp32_to_fp16(max_abs / 127.0f);
    const float d = fp16_to_fp32(blk.d);
    uint8_t q[256];
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? std::clamp(static_cast<int>(std::lrintf(scale[j] / d)), -128, 127) : 0;
      blk.scales[j] = static_cast<int8_t>(sc);
      const float s = d * sc;
      for (int i = 0; i < 16; ++i) {
        const int v = s != 0.0f ? static_cast<int>(std::lrintf(x[16 * j + i] / s)) : 0;
        q[16 * j + i] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    store_q6_k_quants(q, blk.ql, blk.qh);
  }
}

}  // namespace

void store_q6_k_quants(const uint8_t q[256], uint8_t ql[128], uint8_t qh[64]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qh_src = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = qh_src[l], q2 = qh_src[l + 32], q3 = qh_src[l + 64], q4 = qh_src[l + 96];
      ql[64 * h + l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

bool is_supported_weight_type(TensorType type) {
  const WeightTypeInfo* info = find_weight_type(type);
  return info != nullptr && info->rows_kernel.has_value();
}

TensorType fitting_weight_type(TensorType type, int64_t n_in) {
  while (n_in % int64_t(traits(type).block_elements) != 0) {
    switch (type) {
      case TensorType::Q4_K: type = TensorType::Q4_0; break;
      case TensorType::Q6_K: type = TensorType::Q8_0; break;
      default: type = TensorType::F16; break;
    }
  }
  return type;
}

void dequantize_row(TensorType type, const void* src, float* dst, int64_t n, float row_scale) {
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case TensorType::BF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case TensorType::I8: {
      const auto* q = static_cast<const int8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = q[i] * row_scale;
      return;
    }
    case TensorType::FP8_E4M3:
      dequantize_row_fp8(static_cast<const uint8_t*>(src), n, row_scale, dst);
      return;
    case TensorType::INT4:
      fail("INT4 rows need their group scales: use dequantize_weight_row");
    case TensorType::Q8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < 32; ++j) dst[b * 32 + j] = blocks[b].qs[j] * d;
      }
      return;
    }
    case TensorType::Q4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float d = fp16_to_fp32(blocks[b].d);
        for (int j = 0; j < 16; ++j) {
          dst[b * 32 + j] = (static_cast<int>(blocks[b].qs[j] & 0xF) - 8) * d;
          dst[b * 32 + j + 16] = (static_cast<int>(blocks[b].qs[j] >> 4) - 8) * d;
        }
      }
      return;
    }
    case TensorType::Q4_K:
      dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / 256);
      return;
    case TensorType::Q6_K:
      dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / 256);
      return;
    default:
      fail("cannot dequantize tensor type {}", tensor_type_name(type));
  }
}

void quantize_row(TensorType type, const float* src, void* dst, int64_t n, float* row_scale) {
  switch (type) {
    case TensorType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::F16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case TensorType::BF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case TensorType::I8: {
      float amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float scale = amax / 127.0f;
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      auto* q = static_cast<int8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::lrintf(src[i] * inv));
      *row_scale = scale;
      return;
    }
    case TensorType::FP8_E4M3:
      *row_scale = quantize_row_fp8(src, n, static_cast<uint8_t*>(dst));
      return;
    case TensorType::Q8_0: {
      auto* blocks = static_cast<BlockQ8_0*>(dst);
      for (int64_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(src[b * 32 + j]));
        const float d = amax / 127.0f;
        const float inv = d > 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 32; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::lrintf(src[b * 32 + j] * inv));
      }
      return;
    }
    case TensorType::Q4_0: {
      auto* blocks = static_cast<BlockQ4_0*>(dst);
      for (int64_t b = 0; b < n / 32; ++b) {
        // The value of largest magnitude maps to -8 exactly, so its sign picks the scale's sign.
        float max_value = 0.0f, amax = 0.0f;
        for (int j = 0; j < 32; ++j) {
          const float v = src[b * 32 + j];
          if (std::fabs(v) > amax) {
            amax = std::fabs(v);
            max_value = v;
          }
        }
        const float d = max_value / -8.0f;
        const float inv = d != 0.0f ? 1.0f / d : 0.0f;
        blocks[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) {
          const int lo = std::min(15, static_cast<int>(src[b * 32 + j] * inv + 8.5f));
          const int hi = std::min(15, static_cast<int>(src[b * 32 + j + 16] * inv + 8.5f));
          blocks[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
    }
    case TensorType::Q4_K:
      quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n / 256);
      return;
    case TensorType::Q6_K:
      quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n / 256);
      return;
    default:
      fail("quantization to {} is not implemented", tensor_type_name(type));
  }
}

}  // namespace tessera
