// Tessera's low-bit weight formats — FP8 E4M3 per output channel, INT4 group-wise asymmetric — as scalar
// reference encoders and decoders (which define them), and how they are stored in GGUF files.
//
// GGUF has no type id for either, and a custom id would make the file unreadable elsewhere, so on disk both are
// an I8 tensor of raw bytes plus companion tensors and one metadata key per tensor:
//   FP8:  NAME [n_in, n_out] I8 (E4M3 bytes), NAME.scale [n_out] F32;  tessera.quant.NAME.format = "fp8_e4m3"
//   INT4: NAME [int4_row_bytes(n_in), n_out] I8 (nibbles), NAME.scale and NAME.zero [n_groups, n_out] F16;
//         tessera.quant.NAME.format = "int4", tessera.quant.NAME.group_size = G (u32)
// Tools that do not know the keys see an I8 tensor of the wrong shape (INT4) or raw int8 (FP8) without the
// format key, never a silently different type id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/weight_matrix.h"

namespace tessera {

// ---- FP8 E4M3 (values as in core/fp8.h: the "fn" variant, largest finite 448) ---------------------------------
constexpr float kE4M3Max = 448.0f;

// A row as E4M3 bytes of x / scale with scale = max|x| / 448; returns the scale (0 for an all-zero row).
float quantize_row_fp8(const float* x, int64_t n, uint8_t* dst);
void dequantize_row_fp8(const uint8_t* src, int64_t n, float scale, float* dst);

// ---- INT4 group-wise ----------------------------------------------------------------------------------------
// value = scale_g · (q − zero_g), q in [0, 15], one fp16 scale and fp16 (possibly fractional) zero point per
// group of G values along the row; a row's last group is shorter when G does not divide n. Nibbles are packed
// in chunks of 32 values, 16 bytes each: byte j of chunk c holds value 32c + j in its low nibble and 32c + 16 + j
// in its high nibble (unpacking is an AND and a shift per 32 values). A partial last chunk is padded with zero
// nibbles. G must be a positive multiple of 32.
constexpr int kInt4Chunk = 32;
inline size_t int4_row_bytes(int64_t n) { return static_cast<size_t>((n + kInt4Chunk - 1) / kInt4Chunk) * 16; }
inline int64_t int4_n_groups(int64_t n, int64_t group) { return (n + group - 1) / group; }
inline bool is_valid_int4_group(int64_t group) { return group >= 32 && group % 32 == 0 && group <= 4096; }

struct Int4Group {
  float scale = 0.0f;  // both already rounded through fp16: what the decoder sees
  float zero = 0.0f;
};
// Round-to-nearest parameters from the group's min and max (the range maps exactly onto [0, 15]).
Int4Group int4_fit_group(const float* x, int64_t n);
// The same for a given range [lo, hi] (a clipped one: values outside saturate at 0 or 15).
Int4Group int4_fit_range(float lo, float hi);
inline int int4_quantize_value(float x, const Int4Group& g) {
  if (g.scale == 0.0f) return 0;
  const float q = __builtin_nearbyintf(x / g.scale + g.zero);
  return q < 0.0f ? 0 : q > 15.0f ? 15 : static_cast<int>(q);
}
inline float int4_dequantize_value(int q, const Int4Group& g) { return g.scale * (static_cast<float>(q) - g.zero); }

void int4_set(uint8_t* row, int64_t i, int q);  // row must start zeroed (padding nibbles stay 0)
int int4_get(const uint8_t* row, int64_t i);

// Round-to-nearest encoding of one row: packed nibbles (int4_row_bytes(n)), fp16 scales and zeros
// (int4_n_groups(n, group) each).
void quantize_row_int4(const float* x, int64_t n, int64_t group, uint8_t* dst, uint16_t* scales, uint16_t* zeros);
void dequantize_row_int4(const uint8_t* src, int64_t n, int64_t group, const uint16_t* scales,
                         const uint16_t* zeros, float* dst);

// ---- any weight matrix --------------------------------------------------------------------------------------
// Row r of w in fp32, for every type the kernels support (INT4 and FP8 included).
void dequantize_weight_row(const WeightMatrix& w, int64_t r, float* dst);

}  // namespace tessera
