// Internal interface between matmul.cpp (dispatch, threading, scratch) and the per-ISA matmul kernels.
// Plain data and declarations only: ISA files include it, and an inline function here could be compiled with
// wider instructions there and picked by the linker for baseline callers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/kernel_type.h"

namespace tessera::kernels {

// How activations are quantized, per token: one scale for the whole row (I8 weights), one per block of 32 values
// (Q8_0, Q4_0, Q6_K), or one per 256-value super-block (Q4_K, as llama.cpp's Q8_K: a super-block's products then
// stay exact integers up to one float step per super-block, where a scale per 32 values needs one per 32).
enum class ActBlocks : uint8_t { PerRow, Block32, Block256 };

// Activations quantized for integer dot products. Per token: n_in int8 values and their scales (ActBlocks).
struct QuantizedActs {
  const int8_t* q = nullptr;         // [n_tokens, n_in]
  const int8_t* q_abs = nullptr;     // [n_tokens, n_in] |q|: maddubs' unsigned operand (PerRow, Block32)
  const float* scale = nullptr;      // [n_tokens, 1, n_in / 32 or n_in / 256] (ActBlocks)
  const int16_t* sum16 = nullptr;    // [n_tokens, n_in / 16] Σq over 16 values (Block32)
  const int16_t* sum32 = nullptr;    // [n_tokens, n_in / 32] Σq over 32 values (Block256: Q4_K's mins)
  const int32_t* row_sum = nullptr;  // [n_tokens] Σq over the whole row, I8 only (VNNI's unsigned-weight offset)
  // I8 with an outlier threshold (else null): per token, the columns left out of q (stored as 0 there) and
  // their fp32 values, in increasing column order; token t's list starts at t * n_in.
  const int32_t* outlier_count = nullptr;  // [n_tokens]
  const int32_t* outlier_col = nullptr;    // [n_tokens, n_in], the first outlier_count[t] used
  const float* outlier_val = nullptr;      // [n_tokens, n_in]
  // Distinct for every quantization (new_activations_id; 0: unknown): a kernel may keep what it derives from
  // these activations (packed tiles) for as long as the id stays the same.
  uint64_t id = 0;
};

// An id for QuantizedActs::id or LowbitArgs::acts_id: never 0, never the same twice in a process.
inline uint64_t new_activations_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

// Whether a kernel's scratch, last derived from the activations `packed_id`, already holds what activations `id`
// give: the ids match and are known (not 0). Otherwise the scratch is taken for `id`, to be derived again.
inline bool still_packed_for(uint64_t& packed_id, uint64_t id) {
  if (id != 0 && id == packed_id) return true;
  packed_id = id;
  return false;
}

// The kernel types (a weight type in one layout) come from core/kernel_type.h, an enum-only header; the
// weight-type registry (core/weight_types.h) says which weight type and layout each stands for.
using tessera::KernelType;

// Rows per panel of the float panel layout (kernels/interleave.h).
constexpr int kPanelRows = 32;

// Up to this many tokens the panel tiles (float and bf16 products) read each token's row of activations; more
// take the packed tiles, which read them in tile_order.h's order.
constexpr int64_t kPanelDirectTokens = 4;

struct MatmulArgs {
  KernelType type = KernelType::F32;
  int64_t n_in = 0;
  const uint8_t* w = nullptr;  // n_out rows of row_bytes
  size_t row_bytes = 0;
  const float* row_scales = nullptr;  // I8 and FP8 only
  const float* x = nullptr;           // [n_tokens, n_in] fp32, float weight types
  // BF16 products only (WeightMatrix::bf16_products): x rounded to bf16, n_tokens × (n_in + 1) / 2 pairs, word
  // p holding x[2p] in its low half and x[2p + 1] (zero past an odd n_in) in its high half; up to
  // kPanelDirectTokens tokens row by row, more in the packed tiles' order (tile_order.h); at Isa::Amx, in the
  // AMX tiles' layout (bf16_tile_layout.h).
  const uint32_t* x_bf16 = nullptr;
  // BF16x32 with bf16 products (WeightMatrix::bf16_products): the panels are in pair order (interleave.h).
  bool bf16_pairs = false;
  // Float panels (matmul_panel_inl.h) with more than kPanelDirectTokens tokens: x in the packed tiles' order
  // (tile_order.h), written once per call by pack_panel_acts of the kernels' ISA level.
  const float* x_packed = nullptr;
  QuantizedActs xq;                   // quantized weight types
  int64_t n_tokens = 0;
  float* y = nullptr;                 // [n_tokens, n_out]
  int64_t n_out = 0;
};

// Computes y[t, o] for every token and o in [row_begin, row_end). The value of one element depends only on
// its weight row and token row: no reduction is split, so any partition of rows gives identical bits.
using MatmulRowsFn = void (*)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);

// Quantizes tokens [t_begin, t_end) of x in `blocks` (QuantizedActs says which arrays each form fills; the
// others may be null).
using QuantizeActsFn = void (*)(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks,
                                int8_t* q, int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32,
                                int32_t* row_sum);

// The kernels of one ISA level: one entry per weight-type family (matmul_<family>_<isa>.cpp), each taking every
// kernel type of its family, and the activation quantization the integer families share (matmul_acts_<isa>.cpp).
// matmul.cpp picks one per matrix (rows_kernel).
namespace avx2 {
void matmul_float_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);   // F32, F16, BF16 and x32, FP8x32
// Tokens [t_begin, t_end) of a batch of n_tokens into the float panel tiles' order at this level (tile_order.h).
void pack_panel_acts(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end, float* out);
void matmul_q8_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);    // Q8_0, Q8_0x8
void matmul_q4_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);    // Q4_0, Q4_0x8
void matmul_kquant_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);  // Q4_K, Q6_K and x8
void matmul_i8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);      // I8, I8x8
void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks, int8_t* q,
                   int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32, int32_t* row_sum);
}  // namespace avx2

namespace avx512 {
void matmul_float_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void pack_panel_acts(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end, float* out);
void matmul_q8_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_q4_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_kquant_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_i8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks, int8_t* q,
                   int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32, int32_t* row_sum);
// AVX-512 BF16 only (matmul_bf16_avx512.cpp): BF16x32 matrices with bf16 products, and the activations they take
// (tokens [t_begin, t_end) of a batch of n_tokens rounded to bf16 into MatmulArgs::x_bf16's layout).
void matmul_bf16_products_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void round_to_bf16(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end,
                   uint32_t* pairs);
void round_f16_to_bf16(uint8_t* data, size_t n);  // interleave.h's, on zmm
// The same activations in the AMX-BF16 tiles' layout (bf16_tile_layout.h), for amx::matmul_bf16_products_rows.
void round_to_bf16_tiles(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end,
                         uint32_t* pairs);
}  // namespace avx512

// Isa::Amx. matmul_i8_amx.cpp: for the matrices takes_amx_int8_tiles (kernels/matmul.h) accepts, products of 12
// tokens or more on AMX-INT8 tiles; fewer tokens go on to avx512::matmul_i8_rows. matmul_bf16_amx.cpp: BF16x32
// matrices with bf16 products, every token count on AMX-BF16 tiles, the activations in MatmulArgs::x_bf16 in
// bf16_tile_layout.h's layout (avx512::round_to_bf16_tiles).
namespace amx {
// Values per tile multiply: the rows of a matrix that takes the tiles are whole steps (takes_amx_int8_tiles).
constexpr int64_t kStepValues = 64;
void matmul_i8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
void matmul_bf16_products_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace amx

}  // namespace tessera::kernels
