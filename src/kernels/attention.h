// Causal attention of one token's query heads over one sequence's cached keys and values, read through its
// block table (PagedAttention layout), grouped-query aware; and the encodings K/V rows are stored in.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu_features.h"
#include "core/kv_type.h"

namespace tessera {

// Encodes one token's row of n_head_kv * head_dim floats into `dst`; quantized types write n_head_kv scales.
void encode_kv_row(KvType type, const float* src, int64_t n_head_kv, int64_t head_dim, void* dst, float* scales);
// The inverse, for tests and debugging.
void decode_kv_row(KvType type, const void* src, const float* scales, int64_t n_head_kv, int64_t head_dim, float* dst);

// Where one sequence's K and V for one layer live. Position p is in block p / block_size at row p % block_size;
// a row holds n_head_kv * head_dim elements of `type`. For I8/FP8, a block's scales, [block_size, n_head_kv]
// floats, start `scales_offset` bytes after the block's first row.
struct KvBlocksView {
  KvType type = KvType::F32;
  const uint8_t* const* k_blocks = nullptr;  // [n_blocks]
  const uint8_t* const* v_blocks = nullptr;
  int64_t block_size = 0;
  int64_t scales_offset = 0;
};

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // n_head % n_head_kv == 0; query head h reads kv head h / (n_head / n_head_kv)
  int64_t head_dim = 0;
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
};

// Kv heads whose query heads one token's AVX-512 pass packs into a register's 16 lanes: 4 for groups of up to 4
// query heads, 2 for up to 8, else 1 (a group fills the lanes itself). Both kernels take it as an argument
// (attend_one_token_packed's G; the AVX2 kernel's 8-lane passes take half of it, for groups of up to 8).
inline int64_t attend_packed_kv_heads(const AttentionShape& shape) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  return group <= 4 ? 4 : group <= 8 ? 2 : 1;
}

// Query heads of one token that callers splitting heads across calls keep together: a call whose heads start and
// end on multiples of it (or at n_head) runs whole passes, each kv head's rows read and widened once. A split
// inside a kv head's group reads its K/V rows again in each call, and one inside a pass fills fewer lanes (2 of a
// register's 16, for TinyLlama's 8-head groups cut in 2-head calls).
inline int64_t attend_heads_unit(const AttentionShape& shape) {
  return shape.n_head / shape.n_head_kv * attend_packed_kv_heads(shape);
}

// Floats of scratch one call needs when its last token attends n_pos positions, for the larger of the two kernel
// layouts. Both levels: the queries transposed (8 rows per register at AVX2, 16 at AVX-512), scores
// [position][row] in chunks of 48 positions, 48 fp32 K/V rows, the outputs and two floats per row (its score
// maximum and 1 / Σ e). One token over several kv heads of at most 8 query heads each: 48 K/V rows of G kv heads
// interleaved, and the queries, scores, maxima and outputs of every pass of G kv heads at once, as
// the passes run chunk by chunk together (16 lanes: G = 4 for groups of up to 4 query heads, else 2; 8 lanes:
// half that).
inline int64_t attend_scratch_floats(int64_t n_pos, const AttentionShape& shape, int64_t n_tokens = 1) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t rows = n_tokens * group;
  const int64_t stride8 = (shape.head_dim + 7) / 8 * 8, stride16 = (shape.head_dim + 15) / 16 * 16;
  const int64_t rows8 = (rows + 7) / 8 * 8, rows16 = (rows + 15) / 16 * 16, n_pos48 = (n_pos + 47) / 48 * 48;
  const int64_t avx2 = rows8 * (shape.head_dim + n_pos48 + 2) + 48 * stride8 + rows * stride8;
  const int64_t avx512 = rows16 * (shape.head_dim + n_pos48 + 2) + 48 * stride16 + rows * stride16;
  const auto packed = [&](int64_t lanes, int64_t stride, int64_t g) {
    const int64_t passes = (shape.n_head_kv + g - 1) / g;
    return 48 * stride * g + passes * lanes * (shape.head_dim + n_pos48 + stride + 1);
  };
  const int64_t packed_g = attend_packed_kv_heads(shape);
  const int64_t packed16 = packed_g > 1 ? packed(16, stride16, packed_g) : 0;
  const int64_t packed8 = packed_g > 1 ? packed(8, stride8, packed_g / 2) : 0;
  return std::max({avx2, avx512, packed16, packed8});
}

// q: [n_head, head_dim]; attends positions [0, n_pos); out: [n_head, head_dim].
// `scratch` holds at least attend_scratch_floats(n_pos, shape) floats. Heads [head_begin, head_end) only, so
// callers can split heads across threads; the result per head does not depend on that split.
void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out);
// The same at an explicit ISA level (Isa::Scalar is the reference).
void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, Isa isa);

// n_tokens consecutive tokens of one sequence (a prompt chunk): token i's queries at q + i * q_stride attend
// positions [0, n_pos + i) and its output goes to out + i * out_stride. Each K/V row is read and widened once for
// all of them; every token's result is bit-identical to its own attend call. `scratch` holds at least
// attend_scratch_floats(n_pos + n_tokens - 1, shape, n_tokens) floats.
void attend_tokens(const float* q, int64_t q_stride, int64_t n_tokens, const KvBlocksView& kv, int64_t n_pos,
                   const AttentionShape& shape, int64_t head_begin, int64_t head_end, float* scratch, float* out,
                   int64_t out_stride, Isa isa = active_isa());

}  // namespace tessera
