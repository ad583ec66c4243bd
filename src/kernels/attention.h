// Causal attention of one token's query heads over one sequence's cached keys and values, read through its
// block table (PagedAttention layout), grouped-query aware.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"

namespace tessera {

// Where one sequence's K and V for one layer live. Position p is in block p / block_size at row p % block_size;
// a row holds n_head_kv * head_dim floats. A contiguous cache is the special case of a single large block.
struct KvBlocksView {
  const float* const* k_blocks = nullptr;  // [n_blocks] pointers to [block_size, n_head_kv * head_dim]
  const float* const* v_blocks = nullptr;
  int64_t block_size = 0;
};

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // n_head % n_head_kv == 0; query head h reads kv head h / (n_head / n_head_kv)
  int64_t head_dim = 0;
  float scale = 1.0f;     // usually 1/sqrt(head_dim)
};

// q: [n_head, head_dim]; attends positions [0, n_pos); out: [n_head, head_dim].
// `scratch` holds at least n_pos floats. Heads [head_begin, head_end) only, so callers can split heads across
// threads; the result per head does not depend on that split.
void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out);
// The same at an explicit ISA level (Isa::Scalar is the reference).
void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, Isa isa);

}  // namespace tessera
