// Float weights (F32, F16, BF16, FP8) in panels of 32 rows (WeightLayout::Panel32, kernels/interleave.h), for
// matmul_float_avx2.cpp and matmul_float_avx512.cpp. Each passes its vector as the template parameter PV: the
// vector type and its width (8 or 16 lanes), load/convert, broadcast, FMA, and the tile shapes its register file
// allows. Anonymous namespace, for the reason matmul_ymm_inl.h gives.
//
// A panel holds, for each input index k, its 32 rows' weights side by side, so one vector load gives L rows at
// one k, and a tile is an outer product: per k, NV weight vectors and NT broadcast activations feed NV·NT FMAs,
// each weight converted once for NT tokens. (With rows stored whole, the float tiles reduce along k in vector
// lanes: every FMA needs a weight and an activation vector from L1 or L2 and a horizontal sum ends each
// element; at 512 tokens they ran at 61-69 % of the fp32 peak on one Zen 5 core, where this tile's instruction
// mix runs at 92-94 % in cache.)
//
// BF16 panels in pair order (a matrix with bf16 products, interleave.h) at a level without AVX-512 BF16: the
// even k takes the low halves of the pair words, the odd k their high halves, so the chain still takes k in order.
//
// Every element is one FMA chain over k in order from zero: y[t][r] = fma(w[r][k], x[t][k], ..) for k = 0, 1,
// ..., n_in - 1, whatever the tile, the token count, the thread split or the vector width: a token's result has
// the same bits alone or in any batch, and at the AVX2 and AVX-512 levels alike. A prompt's long rows run in
// chunks of k whose partial sums wait in y; an fp32 value stored and loaded back is unchanged, so the chain is
// the same. FP8 rows multiply their ended chain by the row scale (times 2^8), one multiply per element.

#pragma once

#include "kernels/fp8_fp16_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/tile_order.h"

namespace tessera::kernels {
namespace {

// The template argument for BF16 panels in pair order (MatmulArgs::bf16_pairs): a tag beside the kernel types,
// never a matrix's.
constexpr KernelType kBf16Pairs = static_cast<KernelType>(-1);

template <KernelType T>
constexpr int panel_elem_bytes() {
  return T == KernelType::F32x32 ? 4 : T == KernelType::FP8x32 ? 1 : 2;
}

// Bytes between two rows' weights in a slice, or in pair order in a pair (a pair word a row).
template <KernelType T>
constexpr int panel_row_stride() {
  return T == kBf16Pairs ? 4 : panel_elem_bytes<T>();
}

// L weights of rows [r, r + L) at one k (p: the first row's element in the panel's k-slice); not FP8.
template <typename PV, KernelType T>
TESSERA_INLINE inline typename PV::V panel_load(const uint8_t* p) {
  if constexpr (T == KernelType::F32x32) return PV::load_f32(p);
  if constexpr (T == KernelType::F16x32) return PV::load_f16(p);
  return PV::load_bf16(p);
}

// A tile's NV weight vectors at byte `at` of their streams (w, from panel_vectors). FP8 comes as its value · 2^-8
// (kernels/fp8_fp16_inl.h; panel_scales restores the 2^8 with the row scale), two vectors per widening where the
// tile has an even count: vectors 2i and 2i + 1 are adjacent rows of one panel (a tile's first row is a multiple
// of 2L into its panel), so their 2L bytes are contiguous. Widening 32 bytes at once took 6 vector operations per
// 32 weights against 10 one vector at a time; a one-vector tile widens its vector alone.
template <typename PV, KernelType T, int NV>
TESSERA_INLINE inline void panel_load_tile(const uint8_t* const (&w)[NV], int64_t at, typename PV::V (&wv)[NV]) {
  if constexpr (T == KernelType::FP8x32 && NV % 2 == 0) {
    static_for<NV / 2>([&](auto i) TESSERA_INLINE { PV::load_fp8_scaled_pair(w[2 * i] + at, wv[2 * i], wv[2 * i + 1]); });
  } else if constexpr (T == KernelType::FP8x32) {
    static_for<NV>([&](auto v) TESSERA_INLINE { wv[v] = PV::load_fp8_scaled(w[v] + at); });
  } else {
    static_for<NV>([&](auto v) TESSERA_INLINE { wv[v] = panel_load<PV, T>(w[v] + at); });
  }
}

// How a k's weights lie in its panel: in a slice of their own (and BF16's odd last k in pair order), or in the
// low (k even) or high half of pair words.
enum class PanelK { Slice, Low, High, Last };
template <PanelK K>
using PanelKTag = std::integral_constant<PanelK, K>;

// body(k, tag) for every k in [k0, k_end) in order; k0 is even (0 or a chunk's start).
template <KernelType T, typename F>
TESSERA_INLINE inline void for_each_panel_k(int64_t k0, int64_t k_end, int64_t n_in, F&& body) {
  if constexpr (T == kBf16Pairs) {
    const int64_t pairs_end = std::min(k_end, n_in & ~int64_t(1));
    int64_t k = k0;
    for (; k < pairs_end; k += 2) {
      body(k, PanelKTag<PanelK::Low>{});
      body(k + 1, PanelKTag<PanelK::High>{});
    }
    if (k < k_end) body(k, PanelKTag<PanelK::Last>{});
  } else {
    for (int64_t k = k0; k < k_end; ++k) body(k, PanelKTag<PanelK::Slice>{});
  }
}

// A tile's NV weight vectors at k, `k` counted from where w points (an even k); `last`: BF16's odd last k.
// Pair words are loaded once, at the even k, into `pairs`, and the odd k takes their high halves.
template <typename PV, KernelType T, int NV, PanelK K>
TESSERA_INLINE inline void panel_load_k(const uint8_t* const (&w)[NV], const uint8_t* const (&last)[NV], int64_t k,
                                        PanelKTag<K>, typename PV::V (&pairs)[NV], typename PV::V (&wv)[NV]) {
  constexpr int64_t kSlice = kPanelRows * panel_elem_bytes<T>();  // in pair order: a pair's 128 bytes per 2 k
  if constexpr (K == PanelK::Slice) {
    panel_load_tile<PV, T, NV>(w, k * kSlice, wv);
  } else if constexpr (K == PanelK::Low) {
    static_for<NV>([&](auto v) TESSERA_INLINE {
      pairs[v] = PV::load_f32(w[v] + k * kSlice);
      wv[v] = PV::bf16_low(pairs[v]);
    });
  } else if constexpr (K == PanelK::High) {
    static_for<NV>([&](auto v) TESSERA_INLINE { wv[v] = PV::bf16_high(pairs[v]); });
  } else {
    static_for<NV>([&](auto v) TESSERA_INLINE { wv[v] = PV::load_bf16(last[v]); });
  }
}

// FP8: the factor each row's chain is multiplied by once it has ended (row scale · 2^8); the others have none.
template <KernelType T>
constexpr bool panel_scaled() {
  return T == KernelType::FP8x32;
}

template <typename PV, KernelType T>
TESSERA_INLINE inline typename PV::V panel_scales(const MatmulArgs& a, int64_t r) {
  return PV::mul(PV::load(a.row_scales + r), PV::set1(256.0f));
}

// Where vector v of a tile starting at row r0 reads its rows' weights at k = 0 (the k-slice stride is
// 32 · element bytes; in pair order: in the first pair's words, 4 bytes a row, and at an odd row's last k,
// `last`); L divides 32, so a vector never straddles two panels.
template <typename PV, KernelType T, int NV>
TESSERA_INLINE inline void panel_vectors(const MatmulArgs& a, int64_t r0, const uint8_t* w[NV],
                                         const uint8_t* last[NV]) {
  constexpr int64_t L = PV::kLanes;
  const size_t panel_bytes = size_t(kPanelRows) * a.row_bytes;
  static_for<NV>([&](auto v) TESSERA_INLINE {
    const int64_t r = r0 + v * L;
    const uint8_t* panel = a.w + size_t(r / kPanelRows) * panel_bytes;
    w[v] = panel + size_t(r % kPanelRows) * panel_row_stride<T>();
    last[v] = panel + size_t(a.n_in - 1) * kPanelRows * 2 + size_t(r % kPanelRows) * 2;
  });
}

// NV vectors of rows from r0 × NT tokens from t0, reading the activations in place: the decode and small-batch
// tile. Each of its panels is one stream of 32·element bytes per k; the line kPrefetchBytes ahead is requested
// (one prefetch per 64-byte line, per panel).
template <typename PV, KernelType T, int NV, int NT>
__attribute__((noinline, flatten)) void panel_tile_direct(const MatmulArgs& a, int64_t r0, int64_t t0) {
  constexpr int64_t L = PV::kLanes, kSlice = kPanelRows * panel_elem_bytes<T>();
  constexpr int kVectorsPerPanel = kPanelRows / L, kPanels = (NV + kVectorsPerPanel - 1) / kVectorsPerPanel;
  const uint8_t *w[NV], *last[NV];
  panel_vectors<PV, T, NV>(a, r0, w, last);
  const float* x[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { x[t] = a.x + (t0 + t) * a.n_in; });
  typename PV::V acc[NV][NT];
  static_for<NV>([&](auto v) TESSERA_INLINE { static_for<NT>([&](auto t) TESSERA_INLINE { acc[v][t] = PV::zero(); }); });
  typename PV::V pairs[NV];  // in pair order: the words of this k and the next
  for_each_panel_k<T>(0, a.n_in, a.n_in, [&](int64_t k, auto where) TESSERA_INLINE {
    // FP8's 32-byte slices share a line two by two: one request every other k.
    if (kSlice >= 64 || k % (64 / kSlice) == 0) {
      static_for<kPanels>([&](auto p) TESSERA_INLINE {
        static_for<(kSlice + 63) / 64>([&](auto line) TESSERA_INLINE {
          prefetch(w[p * kVectorsPerPanel] + k * kSlice + 64 * line + kPrefetchBytes);
        });
      });
    }
    typename PV::V b[NT];
    static_for<NT>([&](auto t) TESSERA_INLINE { b[t] = PV::set1(x[t][k]); });
    typename PV::V wv[NV];
    panel_load_k<PV, T, NV>(w, last, k, where, pairs, wv);
    static_for<NV>([&](auto v) TESSERA_INLINE {
      PV::pin(wv[v]);  // one load for the NT FMAs, not one per FMA
      static_for<NT>([&](auto t) TESSERA_INLINE { acc[v][t] = PV::fma(wv[v], b[t], acc[v][t]); });
    });
  });
  static_for<NV>([&](auto v) TESSERA_INLINE {
    if constexpr (panel_scaled<T>()) {
      const typename PV::V scale = panel_scales<PV, T>(a, r0 + v * L);
      static_for<NT>([&](auto t) TESSERA_INLINE { acc[v][t] = PV::mul(acc[v][t], scale); });
    }
    static_for<NT>([&](auto t) TESSERA_INLINE { PV::store(a.y + (t0 + t) * a.n_out + r0 + v * L, acc[v][t]); });
  });
}

// NV vectors of rows from r0 × NT tokens from t0 over k in [k0, k0 + n_k), the activations packed as
// xp[(k - k0) · NT + t]: the prompt tile. `first`: the chain starts here; otherwise it continues from y.
// `ahead`, if not null: the same k range of the next step's rows (PV::kPackedRows: the first tile of each step
// requests them, so that they arrive while this one computes: a 16-token step otherwise read each chunk of
// weights from memory and computed on it in turn).
template <typename PV, KernelType T, int NV, int NT>
__attribute__((noinline, flatten)) void panel_tile_packed(const MatmulArgs& a, int64_t r0, int64_t t0, const float* xp,
                                                          int64_t k0, int64_t n_k, bool first, const uint8_t* ahead) {
  constexpr int64_t L = PV::kLanes, kSlice = kPanelRows * panel_elem_bytes<T>();
  // Per k: a panel's slice, or half of it; in pair order these bytes per pair, requested at its even k.
  constexpr int64_t kStepBytes = PV::kPackedRows * panel_row_stride<T>();
  const uint8_t *w[NV], *last[NV];
  panel_vectors<PV, T, NV>(a, r0, w, last);
  static_for<NV>([&](auto v) TESSERA_INLINE { w[v] += k0 * kSlice; });
  if (ahead != nullptr) ahead += k0 * kSlice;
  typename PV::V acc[NV][NT];
  static_for<NV>([&](auto v) TESSERA_INLINE {
    static_for<NT>([&](auto t) TESSERA_INLINE {
      acc[v][t] = first ? PV::zero() : PV::load(a.y + (t0 + t) * a.n_out + r0 + v * L);
    });
  });
  // The step's tiles share its requests: tile `part` of kParts requests them at every kParts-th k. The first of
  // two one-vector tiles requesting all of them (in half the step's time) measured slower: 16 tokens from memory,
  // 2 threads, Zen 4, GFLOP/s, 5632x2048 212-222 against 186-203, 2048x2048 202-211 against 178-195, 2048x5632
  // level (189-203 against 186-203).
  constexpr int64_t kParts = PV::kPackedRows / (NV * L);
  const int64_t part = r0 / (NV * L) % kParts;
  typename PV::V pairs[NV];  // in pair order: the words of this k and the next
  for_each_panel_k<T>(k0, k0 + n_k, a.n_in, [&](int64_t k_in_row, auto where) TESSERA_INLINE {
    const int64_t k = k_in_row - k0;
    const bool requests = T == kBf16Pairs ? k % 2 == 0 && (kParts == 1 || k / 2 % kParts == part)
                                          : kParts == 1 || k % kParts == part;
    if (ahead != nullptr && requests) {
      static_for<(kStepBytes + 63) / 64>([&](auto line) TESSERA_INLINE { prefetch(ahead + k * kSlice + 64 * line); });
    }
    typename PV::V wv[NV];
    panel_load_k<PV, T, NV>(w, last, k, where, pairs, wv);
    static_for<NT>([&](auto t) TESSERA_INLINE {
      const typename PV::V b = PV::set1(xp[k * NT + t]);
      static_for<NV>([&](auto v) TESSERA_INLINE { acc[v][t] = PV::fma(wv[v], b, acc[v][t]); });
    });
  });
  static_for<NV>([&](auto v) TESSERA_INLINE {
    if constexpr (panel_scaled<T>()) {
      if (k0 + n_k == a.n_in) {
        const typename PV::V scale = panel_scales<PV, T>(a, r0 + v * L);
        static_for<NT>([&](auto t) TESSERA_INLINE { acc[v][t] = PV::mul(acc[v][t], scale); });
      }
    }
    static_for<NT>([&](auto t) TESSERA_INLINE { PV::store(a.y + (t0 + t) * a.n_out + r0 + v * L, acc[v][t]); });
  });
}

// Tiles of kDirect[NT] vectors for rows [r, r_end) (whole panels), then narrower ones for the rest.
template <typename PV, KernelType T, int NT>
void panel_rows_direct(const MatmulArgs& a, int64_t t0, int64_t r, int64_t r_end) {
  constexpr int NV = PV::direct_vectors(NT), kMinNV = kPanelRows / PV::kLanes;
  constexpr int64_t L = PV::kLanes;
  for (; r + NV * L <= r_end; r += NV * L) panel_tile_direct<PV, T, NV, NT>(a, r, t0);
  if constexpr (NV > kMinNV) {
    for (; r + kMinNV * L <= r_end; r += kMinNV * L) panel_tile_direct<PV, T, kMinNV, NT>(a, r, t0);
  }
}

// A prompt's activations in the packed tiles' order (tile_order.h), with the chunk of k and the token block of
// PV (kChunk, kBlockTokens): a tile of rows computes a chunk for every token tile of a block before the next
// chunk, so the chunk's weights stay in cache while the block's tiles pass over them.
template <typename PV>
TileOrder panel_order(int64_t n_tokens, int64_t n_in) {
  return TileOrder{n_tokens, n_in, PV::kChunk, PV::kBlockTokens / PV::kPackedTokens * PV::kPackedTokens,
                   PV::kPackedTokens};
}

template <typename PV>
void pack_panel_tokens(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end, float* out) {
  const TileOrder order = panel_order<PV>(n_tokens, n_in);
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* row = x + t * n_in;
    order.for_each_chunk(t, [&](int64_t k0, int64_t k_end, int64_t at, int64_t nt) {
      for (int64_t k = k0; k < k_end; ++k) out[at + (k - k0) * nt] = row[k];
    });
  }
}

// One packed tile of NT tokens from t over the PV::kPackedRows rows from r, in tiles of PV::packed_vectors(NT)
// vectors of rows.
template <typename PV, KernelType T, int NT>
TESSERA_INLINE inline void panel_step_tile(const MatmulArgs& a, int64_t r, int64_t t, const float* xp, int64_t k0,
                                           int64_t n_k, const uint8_t* ahead) {
  constexpr int NV = PV::packed_vectors(NT), kRows = NV * PV::kLanes;
  static_assert(PV::kPackedRows % kRows == 0 && NV * NT <= PV::kMaxAccumulators);
  static_for<PV::kPackedRows / kRows>([&](auto i) TESSERA_INLINE {
    panel_tile_packed<PV, T, NV, NT>(a, r + i * kRows, t, xp, k0, n_k, k0 == 0, ahead);
  });
}

template <typename PV, KernelType T>
void panel_rows_packed(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int NT = PV::kPackedTokens;
  constexpr int64_t kStep = PV::kPackedRows;
  static_assert(kStep % kPanelRows == 0 || kPanelRows % kStep == 0);
  const TileOrder order = panel_order<PV>(a.n_tokens, a.n_in);
  const int64_t chunk = order.chunk();
  for (int64_t tb = 0; tb < a.n_tokens; tb += order.block_tokens) {
    const int64_t te = tb + order.block(tb);
    for (int64_t k0 = 0; k0 < a.n_in; k0 += chunk) {
      const int64_t n_k = std::min(chunk, a.n_in - k0);
      for (int64_t r = row_begin; r < row_end; r += kStep) {
        // The next step's rows: the rest of this panel, or the next panel (past row_end: another thread's, which
        // is harmless to request).
        const int64_t next = r + kStep;
        const uint8_t* ahead = a.w + size_t(next / kPanelRows) * kPanelRows * a.row_bytes +
                               size_t(next % kPanelRows) * panel_row_stride<T>();
        if (next >= a.n_out) ahead = nullptr;
        for_each_tile<NT>(tb, te, [&](auto nt, int64_t t) {
          panel_step_tile<PV, T, decltype(nt)::value>(a, r, t, a.x_packed + order.tile_at(t, k0), k0, n_k,
                                                      t == tb ? ahead : nullptr);
        });
      }
    }
  }
}

// Rows [row_begin, row_end), whole panels, of a panel matrix for every token.
template <typename PV, KernelType T>
void panel_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  static_assert(kPanelDirectTokens == 4);
  switch (a.n_tokens) {
    case 1: return panel_rows_direct<PV, T, 1>(a, 0, row_begin, row_end);
    case 2: return panel_rows_direct<PV, T, 2>(a, 0, row_begin, row_end);
    case 3: return panel_rows_direct<PV, T, 3>(a, 0, row_begin, row_end);
    case 4: return panel_rows_direct<PV, T, 4>(a, 0, row_begin, row_end);
    default: return panel_rows_packed<PV, T>(a, row_begin, row_end);
  }
}

inline bool is_panel_type(KernelType type) {
  return type == KernelType::F32x32 || type == KernelType::F16x32 || type == KernelType::BF16x32 ||
         type == KernelType::FP8x32;
}

template <typename PV>
void panel_matmul_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case KernelType::F32x32: return panel_rows<PV, KernelType::F32x32>(a, row_begin, row_end);
    case KernelType::F16x32: return panel_rows<PV, KernelType::F16x32>(a, row_begin, row_end);
    case KernelType::BF16x32:
      return a.bf16_pairs ? panel_rows<PV, kBf16Pairs>(a, row_begin, row_end)
                          : panel_rows<PV, KernelType::BF16x32>(a, row_begin, row_end);
    case KernelType::FP8x32: return panel_rows<PV, KernelType::FP8x32>(a, row_begin, row_end);
    default: return;
  }
}

}  // namespace
}  // namespace tessera::kernels
