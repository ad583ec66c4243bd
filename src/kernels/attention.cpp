// Attention dispatch, K/V row encodings, and the reference: scores, softmax, weighted sum of values, one head
// at a time.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/ops.h"
#include "kernels/ops_kernels.h"

namespace tessera {

void encode_kv_row(KvType type, const float* src, int64_t n_head_kv, int64_t head_dim, void* dst, float* scales) {
  const int64_t n = n_head_kv * head_dim;
  switch (type) {
    case KvType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case KvType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(src[i]);
      return;
    case KvType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(src[i]);
      return;
    case KvType::I8:
    case KvType::FP8: {
      const float range = type == KvType::I8 ? 127.0f : 448.0f;
      for (int64_t h = 0; h < n_head_kv; ++h) {
        const float* x = src + h * head_dim;
        float amax = 0.0f;
        for (int64_t i = 0; i < head_dim; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float scale = amax / range;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        scales[h] = scale;
        auto* q = static_cast<uint8_t*>(dst) + h * head_dim;
        for (int64_t i = 0; i < head_dim; ++i) {
          q[i] = type == KvType::I8 ? uint8_t(int8_t(std::lrint(x[i] * inv))) : fp32_to_fp8_e4m3(x[i] * inv);
        }
      }
      return;
    }
  }
}

namespace {

// One element of a stored row, without the per-head scale.
inline float load_element(KvType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case KvType::F32: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
    case KvType::F16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return fp16_to_fp32(h);
    }
    case KvType::BF16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return bf16_to_fp32(h);
    }
    case KvType::I8: return float(int8_t(row[i]));
    case KvType::FP8: return fp8_e4m3_table()[row[i]];
  }
  return 0.0f;
}

}  // namespace

void decode_kv_row(KvType type, const void* src, const float* scales, int64_t n_head_kv, int64_t head_dim, float* dst) {
  const auto* row = static_cast<const uint8_t*>(src);
  for (int64_t h = 0; h < n_head_kv; ++h) {
    const float scale = kv_type_has_scales(type) ? scales[h] : 1.0f;
    for (int64_t i = 0; i < head_dim; ++i) dst[h * head_dim + i] = load_element(type, row, h * head_dim + i) * scale;
  }
}

void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out) {
  attend(q, kv, n_pos, shape, head_begin, head_end, scratch, out, active_isa());
}

void attend_tokens(const float* q, int64_t q_stride, int64_t n_tokens, const KvBlocksView& kv, int64_t n_pos,
                   const AttentionShape& shape, int64_t head_begin, int64_t head_end, float* scratch, float* out,
                   int64_t out_stride, Isa isa) {
  const Isa level = kernel_isa(isa < detected_isa() ? isa : detected_isa());
  if (level == Isa::Avx512Vnni) {
    return kernels::avx512::attend(q, q_stride, n_tokens, static_cast<int>(kv.type), fp8_e4m3_table().data(),
                                   kv.k_blocks, kv.v_blocks, kv.block_size, kv.scales_offset, n_pos, shape.n_head,
                                   shape.n_head_kv, shape.head_dim, shape.scale, head_begin, head_end, scratch, out,
                                   out_stride, attend_packed_kv_heads(shape));
  }
  if (level >= Isa::Avx2) {
    return kernels::avx2::attend(q, q_stride, n_tokens, static_cast<int>(kv.type), fp8_e4m3_table().data(),
                                 kv.k_blocks, kv.v_blocks, kv.block_size, kv.scales_offset, n_pos, shape.n_head,
                                 shape.n_head_kv, shape.head_dim, shape.scale, head_begin, head_end, scratch, out,
                                 out_stride, attend_packed_kv_heads(shape));
  }
  for (int64_t i = 0; i < n_tokens; ++i) {
    attend(q + i * q_stride, kv, n_pos + i, shape, head_begin, head_end, scratch, out + i * out_stride, isa);
  }
}

void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, Isa isa) {
  if (kernel_isa(isa < detected_isa() ? isa : detected_isa()) >= Isa::Avx2) {
    return attend_tokens(q, 0, 1, kv, n_pos, shape, head_begin, head_end, scratch, out, 0, isa);
  }
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t row_bytes = shape.n_head_kv * shape.head_dim * kv_element_bytes(kv.type);
  const bool scaled = kv_type_has_scales(kv.type);
  auto row_of = [&](const uint8_t* const* blocks, int64_t p, int64_t g, float* scale) {
    const uint8_t* block = blocks[p / kv.block_size];
    const int64_t slot = p % kv.block_size;
    float s = 1.0f;
    if (scaled) std::memcpy(&s, block + kv.scales_offset + (slot * shape.n_head_kv + g) * 4, 4);
    *scale = s;
    return block + slot * row_bytes + g * shape.head_dim * kv_element_bytes(kv.type);
  };
  for (int64_t h = head_begin; h < head_end; ++h) {
    const float* qh = q + h * shape.head_dim;
    const int64_t g = h / group;
    for (int64_t p = 0; p < n_pos; ++p) {
      float s;
      const uint8_t* k = row_of(kv.k_blocks, p, g, &s);
      float dot = 0.0f;
      for (int64_t i = 0; i < shape.head_dim; ++i) dot += qh[i] * load_element(kv.type, k, i);
      scratch[p] = dot * s * shape.scale;
    }
    softmax(scratch, n_pos, Isa::Scalar);
    float* oh = out + h * shape.head_dim;
    std::memset(oh, 0, static_cast<size_t>(shape.head_dim) * sizeof(float));
    for (int64_t p = 0; p < n_pos; ++p) {
      float s;
      const uint8_t* v = row_of(kv.v_blocks, p, g, &s);
      const float w = scratch[p] * s;
      for (int64_t i = 0; i < shape.head_dim; ++i) oh[i] += w * load_element(kv.type, v, i);
    }
  }
}

}  // namespace tessera
