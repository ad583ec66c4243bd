// How the attention kernels (attention_avx2.cpp, attention_avx512.cpp) address a kv head's K and V rows, and the
// requests for those rows ahead of their reads.
// Anonymous namespace, for the reason matmul_ymm_inl.h gives.
//
// A call reads its kv heads one after another, each a slice of every row (a row holds all kv heads of one
// position), so without help the first slice's miss brought only its own lines and every later head missed
// again. The call's first head requests, kRowsAhead positions on, every line of the row that holds the call's
// heads, and the later heads find them in cache. Decode attention of 16 sequences over 512 positions (22
// layers, caches flushed between layers as the weights' stream flushes them), AVX-512, 2 threads, Zen 5: 21-23 ms
// a step instead of 47-54 for F16 (F32 37 -> 30, BF16 52 -> 24, I8 52 -> 25, FP8 130 -> 37), 78 instead of
// 229 at 2048 positions, one sequence over 512 positions 2.2 instead of 4.4. Requesting only the slice being
// read, as far ahead, gained nothing.
// Over long contexts the rows a first pass requested (its own and the later heads') have left L2 before a later
// pass over all positions (attend_groups' next kv head) reads them, so every such pass requests again, from its
// own heads' lines to the call's last (RowsAhead::from_head). Measured on the AVX-512 one-token path when it still
// ran its passes one after another (one thread, one layer over 2048 positions from memory, kernels_bench's
// BM_AttentionDecodeCold, Zen 5, four alternations, µs): F16 378-387 against 451-583, Llama-3-8B's heads
// 1076-1211 against 1183-1603, I8 level; 256 positions (the rows stay in L2) level; a batch-16 Q8_0 decode step
// after 1024 positions 192.5-206.9 tok/s against 172.4-195.3 (three alternations). Requesting 16 positions
// ahead too measured no better in the model. That path now takes its passes through the positions together,
// chunk by chunk, and needs only the first pass's requests (attention_lanes_inl.h's attend_one_token_packed).
//
// A prompt run's requests go to L2 (prefetcht1), 8 positions ahead; a one-token call's to L2 16 ahead and again
// into L1 (prefetcht0) 4 ahead (RequestScheme below). Into L1 alone they held the first head's loads on memory
// all the same: kernels_bench's BM_AttentionDecodeCold (one sequence, one thread, 22 layers' K/V behind a 24 MiB
// stream, Zen 4), µs per layer, T0 16 ahead -> T1 8 ahead: F16 at 256 positions 92.6 -> 62.3 (AVX2 83.7 ->
// 52.6), at 2048 630 -> 478 (589 -> 407); F32 739 -> 610, BF16 618 -> 454, I8 500 -> 446 (AVX2 401 -> 416), FP8
// (bound by its table lookups) level. The L1 request a few positions before the read then finds the line in L2
// and costs little. In the model, decode steps alternating between the two schemes in one process
// (docs/performance.md, "AMD Zen 4, fourteenth session"), TinyLlama Q4_0, batch 1: 0.88-0.91x the step of L2 8
// ahead after 2000 positions (three runs of 1000 rounds), 0.79x at the AVX2 level; level after 32 (0.997-1.000 in
// the host's fast minutes, 0.988-1.007 in its slow ones). A prompt's rows are mostly in cache (its runs read the
// rows the runs before them wrote): there the L1 requests cost 5 % (kernels_bench BM_Attention/512/8, 13.7-15.1 ms
// against 13.1-13.4), so prompt runs keep the L2 scheme.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tessera::kernels {
namespace {

// Mirrors tessera::KvType (not included here: see ops_kernels.h).
enum KvElementType : int { kF32 = 0, kF16 = 1, kBF16 = 2, kI8 = 3, kFP8 = 4 };

template <int T>
constexpr int64_t element_bytes() {
  return T == kF32 ? 4 : (T == kF16 || T == kBF16) ? 2 : 1;
}

// How many positions ahead of the reads a walk requests rows into L2, and into L1 (0: no L1 requests).
struct RequestScheme {
  int64_t l2_ahead, l1_ahead;
};
constexpr RequestScheme kDecodeRequests{16, 4};  // one-token calls: the rows come from memory
constexpr RequestScheme kPromptRequests{8, 0};   // prompt runs: the rows are mostly in cache

// The scheme for a call of n_tokens tokens.
constexpr RequestScheme request_scheme(int64_t n_tokens) {
  return n_tokens == 1 ? kDecodeRequests : kPromptRequests;
}

// The rows scheme.l2_ahead positions after those being read, walked one position at a time; each step also asks
// for the row scheme.l1_ahead positions ahead of the reads to move into L1.
class RowsAhead {
 public:
  // blocks: the block table of n_positions rows, each of n_head_kv heads of head_bytes; the bytes of a row that
  // hold the kv heads of query heads [head_begin, head_end) (group query heads per kv head) are requested.
  RowsAhead(const uint8_t* const* blocks, int64_t block_size, int64_t n_positions, int64_t n_head_kv,
            int64_t head_bytes, int64_t head_begin, int64_t head_end, int64_t group, RequestScheme scheme)
      : blocks_(blocks), block_size_(block_size), row_bytes_(n_head_kv * head_bytes), n_positions_(n_positions),
        head_bytes_(head_bytes), group_(group), scheme_(scheme), offset_(head_begin / group * head_bytes),
        end_(((head_end - 1) / group + 1) * head_bytes) {}

  // The same requests for the call's kv heads from query head `head`'s on: a pass over later heads requests its
  // rows again, as the first pass's requests have left L2 by then over long contexts.
  RowsAhead from_head(int64_t head) const {
    RowsAhead rest = *this;
    rest.offset_ = head / group_ * head_bytes_;
    return rest;
  }

  // A walk whose first requests are for positions p + scheme.l2_ahead and p + scheme.l1_ahead (reading starts
  // at p).
  RowsAhead from(int64_t p) const {
    RowsAhead walk = *this;
    walk.position_ = p + scheme_.l2_ahead;
    walk.block_ = walk.position_ / block_size_;
    walk.slot_ = walk.position_ % block_size_;
    const int64_t near = p + scheme_.l1_ahead;
    walk.near_block_ = near / block_size_;
    walk.near_slot_ = near % block_size_;
    return walk;
  }

  // Requests the next row into L2 and a nearer one into L1 (nothing past the table's end), and moves on by one
  // position.
  void request_next() {
    if (position_ < n_positions_) {
      const uint8_t* at = blocks_[block_] + slot_ * row_bytes_ + offset_;
      for (int64_t line = 0; line < end_ - offset_; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(at + line), _MM_HINT_T1);
      }
      if (scheme_.l1_ahead > 0) {
        const uint8_t* near = blocks_[near_block_] + near_slot_ * row_bytes_ + offset_;
        for (int64_t line = 0; line < end_ - offset_; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(near + line), _MM_HINT_T0);
        }
      }
    }
    ++position_;
    slot_ = slot_ + 1 == block_size_ ? (++block_, 0) : slot_ + 1;
    near_slot_ = near_slot_ + 1 == block_size_ ? (++near_block_, 0) : near_slot_ + 1;
  }

 private:
  const uint8_t* const* blocks_;
  int64_t block_size_, row_bytes_, n_positions_, head_bytes_, group_;
  RequestScheme scheme_;
  int64_t offset_, end_;  // the requested bytes of a row: [offset_, end_)
  int64_t position_ = 0, block_ = 0, slot_ = 0;  // the next L2 request's row
  int64_t near_block_ = 0, near_slot_ = 0;         // the next L1 request's row, l2_ahead - l1_ahead behind it
};

// One kv head's slice of every K (or V) row, read through the block table: each ISA's HeadRows adds its load.
struct KvHeadSlice {
  const uint8_t* const* blocks;
  int64_t block_size, scales_offset, row_bytes, n_head_kv, head_dim, head_offset, g;
  const float* fp8_table;
  const RowsAhead* ahead;  // the call's first kv head: its rows' lines of every kv head of the call, requested ahead
};

// The slice of kv head g in rows of n_head_kv heads of head_dim elements of type T.
template <int T>
KvHeadSlice kv_head_slice(const uint8_t* const* blocks, int64_t block_size, int64_t scales_offset, int64_t n_head_kv,
                          int64_t head_dim, int64_t g, const float* fp8_table, const RowsAhead* ahead) {
  return {blocks,   block_size, scales_offset, n_head_kv * head_dim * element_bytes<T>(), n_head_kv,
          head_dim, g * head_dim * element_bytes<T>(), g, fp8_table, ahead};
}

}  // namespace
}  // namespace tessera::kernels
