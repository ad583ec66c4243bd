// Q4_0, Q8_0, I8, Q4_K and Q6_K rows interleaved in groups of 8, and F32, F16 and BF16 rows in panels of 32
// (kernels/interleave.h): the layouts keep every byte (Q6_K its size), rows read back exactly, and their kernels
// meet the reference bound and the batch-invariance contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/bf16_tile_layout.h"
#include "kernels/column_shares.h"
#include "kernels/interleave.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/static_for.h"
#include "kernels/tile_order.h"

namespace tessera {
namespace {

using testing::error_bound;
using testing::kernel_isas;
using testing::make_weights;
using testing::random_floats;

// make_weights' matrix of `type`, plus an interleaved copy of its bytes.
struct Interleaved {
  testing::OwnedWeights rows;
  std::vector<uint8_t> data;
  WeightMatrix view;
};

// Values per block: a super-block for the K-quants, 32 for the others (the float types have no blocks).
int64_t block_values(TensorType type) { return type == TensorType::Q4_K || type == TensorType::Q6_K ? 256 : 32; }

bool is_panel(TensorType type) {
  return type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16 || type == TensorType::FP8_E4M3;
}

// Rows a layout unit holds: a group of 8, or a panel of 32.
int64_t unit_rows(TensorType type) { return is_panel(type) ? kPanelRows : kInterleaveRows; }

Interleaved make_interleaved(TensorType type, int64_t n_out, int64_t n_in, uint32_t seed) {
  Interleaved m{make_weights(type, n_out, n_in, seed), {}, {}};
  m.data = m.rows.data;
  interleave_rows(type, m.data.data(), n_out, n_in);
  m.view = m.rows.view;
  m.view.data = m.data.data();
  m.view.layout = interleaved_layout(type);
  return m;
}

// make_interleaved's BF16 panels as the loader gives a matrix with bf16 products: in pair order, marked.
Interleaved make_bf16_product_panels(int64_t n_out, int64_t n_in, uint32_t seed) {
  Interleaved m = make_interleaved(TensorType::BF16, n_out, n_in, seed);
  pair_bf16_panels(m.data.data(), n_out, n_in);
  m.view.bf16_products = true;
  return m;
}

// Each of the n_tokens tokens of x multiplied alone (one thread) at `isa`: the bits every batch must reproduce.
std::vector<float> outputs_alone(const Interleaved& m, const std::vector<float>& x, int64_t n_tokens, Isa isa) {
  ThreadPool one(1);
  const int64_t n_in = m.view.n_in, n_out = m.view.n_out;
  std::vector<float> alone(size_t(n_tokens * n_out));
  for (int64_t t = 0; t < n_tokens; ++t) matmul(m.view, &x[t * n_in], 1, &alone[t * n_out], one, isa);
  return alone;
}

// Every element of y (n_tokens × n_out, computed at `isa`) within the data bound of the reference's y_ref.
void expect_within_reference_bound(const Interleaved& m, const std::vector<float>& x, const std::vector<float>& y,
                                   const std::vector<float>& y_ref, int64_t n_tokens, Isa isa) {
  const int64_t n_in = m.view.n_in, n_out = m.view.n_out;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      ASSERT_NEAR(y[t * n_out + o], y_ref[t * n_out + o],
                  error_bound(m.view.type, &m.rows.dequantized[o * n_in], &x[t * n_in], n_in))
          << isa_name(isa) << ", token " << t << ", row " << o;
    }
  }
}

// The whole batch at `isa`, on 1 and 2 threads, gives each token the bits it got alone.
void expect_batch_equals_alone(const Interleaved& m, const std::vector<float>& x, int64_t n_tokens,
                               const std::vector<float>& alone, Isa isa) {
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> y(alone.size());
    matmul(m.view, x.data(), n_tokens, y.data(), pool, isa);
    EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size()))
        << tensor_type_name(m.view.type) << ", " << isa_name(isa) << ", " << threads << " threads";
  }
}

// Activations with NaN, infinite and huge values give a batch the bits of its tokens alone (NaN wherever alone
// gave NaN): their int8 bytes saturate where their sums wrap, and the 256-bit and 512-bit tiles must read both the
// same way, whatever the batch (16 tokens: the 512-bit tiles where the level has them, 256-bit ones for the rest).
TEST(Interleave, NonFiniteActivationsKeepBatchInvariance) {
  const int64_t n_in = 256 * 2, n_out = 40, n_tokens = 16;
  const auto x = testing::non_finite_activations(n_in, 31);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::I8, TensorType::Q4_K, TensorType::Q6_K}) {
    const Interleaved m = make_interleaved(type, n_out, n_in, 32);
    for (const Isa isa : kernel_isas()) {
      if (isa == Isa::Scalar || isa > detected_isa()) continue;
      const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa);
      ThreadPool pool(2);
      std::vector<float> y(alone.size());
      matmul(m.view, x.data(), n_tokens, y.data(), pool, isa);
      ASSERT_NO_FATAL_FAILURE(testing::expect_same_bits_or_both_nan(
          y, alone, n_out, std::string(tensor_type_name(type)) + " at " + std::string(isa_name(isa))));
    }
  }
}

// One token of each type at the AVX-512 level, with the 512-bit one-token tiles (`set_zmm(true)`) and the 256-bit
// ones (`set_zmm(false)`), a process-wide width choice that `zmm()` reads (put back afterwards, however the test
// ends): both give the same bits, within the reference's bound, on one thread and two (37 groups: a thread's odd
// last group of 8 rows).
void expect_decode_tile_widths_agree(std::initializer_list<TensorType> types, int64_t n_in, uint32_t seed,
                                     bool (*zmm)(), void (*set_zmm)(bool)) {
  struct Restore {
    void (*set)(bool);
    bool was;
    ~Restore() { set(was); }
  } restore{set_zmm, zmm()};
  const int64_t n_out = 8 * 37;
  const auto x = random_floats(size_t(n_in), seed);
  for (TensorType type : types) {
    const Interleaved m = make_interleaved(type, n_out, n_in, seed + 1);
    std::vector<float> y_ref(static_cast<size_t>(n_out));
    ThreadPool one(1);
    matmul_reference(m.rows.view, x.data(), 1, y_ref.data(), one);
    std::vector<float> by_width[2];
    for (const bool zmm : {false, true}) {
      set_zmm(zmm);
      by_width[zmm] = outputs_alone(m, x, 1, Isa::Avx512Vnni);
      ASSERT_NO_FATAL_FAILURE(expect_within_reference_bound(m, x, by_width[zmm], y_ref, 1, Isa::Avx512Vnni));
      ThreadPool two(2);
      std::vector<float> y(static_cast<size_t>(n_out));
      matmul(m.view, x.data(), 1, y.data(), two, Isa::Avx512Vnni);
      EXPECT_EQ(0, std::memcmp(y.data(), by_width[zmm].data(), sizeof(float) * y.size()))
          << tensor_type_name(type) << (zmm ? ", 512-bit" : ", 256-bit") << " tiles on 2 threads";
    }
    EXPECT_EQ(0, std::memcmp(by_width[0].data(), by_width[1].data(), sizeof(float) * size_t(n_out)))
        << tensor_type_name(type);
  }
}

// Q4_0, Q8_0 and I8 take the 256-bit one-token tiles (one group of 8 rows at a time) where 512-bit instructions
// run on 256-bit units (decode_tiles_ymm(): Zen 4), the 512-bit ones elsewhere.
TEST(Interleave, DecodeTileWidthsGiveTheSameBits) {
  if (detected_isa() < Isa::Avx512Vnni) GTEST_SKIP() << "no AVX-512 VNNI";
  expect_decode_tile_widths_agree(
      {TensorType::Q4_0, TensorType::Q8_0, TensorType::I8}, 32 * 21, 41, [] { return !decode_tiles_ymm(); },
      [](bool zmm) { set_decode_tiles_ymm(!zmm); });
}

// Q4_K and Q6_K take the 512-bit one-token tiles on Intel (decode_kquant_zmm()), the 256-bit ones elsewhere
// (3 super-blocks a row).
TEST(Interleave, KQuantDecodeTileWidthsGiveTheSameBits) {
  if (detected_isa() < Isa::Avx512Vnni) GTEST_SKIP() << "no AVX-512 VNNI";
  expect_decode_tile_widths_agree({TensorType::Q4_K, TensorType::Q6_K}, 256 * 3, 45, decode_kquant_zmm,
                                  set_decode_kquant_zmm);
}

// I8x8 batches of 12 tokens or more take the AMX tiles (kernels/matmul_i8_amx.cpp) where the CPU has them: every
// token's outputs have the bits it gets alone (the VNNI one-token tile), within the reference's bound, for token
// counts that fill two tiles, one, or leave a tail of 1-15 rows in either; an odd last group of 8 rows per thread
// (5 groups); and rows long enough (8192 values) that the kernel splits the batch into passes that fit L2.
TEST(Interleave, AmxTilesGiveEveryTokenItsBitsAlone) {
  if (detected_isa() < Isa::Amx) GTEST_SKIP() << "no AMX (this CPU has " << isa_name(detected_isa()) << ")";
  for (const int64_t n_in : {int64_t{64 * 5}, int64_t{8192}}) {
    // 5 groups on the short rows; 17 on the long ones, more than one batch of the kernel's group pairs a thread.
    const int64_t n_out = n_in == 8192 ? 8 * 17 : 8 * 5;
    const Interleaved m = make_interleaved(TensorType::I8, n_out, n_in, 43);
    const std::vector<int64_t> counts =
        n_in == 8192 ? std::vector<int64_t>{130} : std::vector<int64_t>{12, 16, 17, 31, 32, 33, 47, 48, 64, 77};
    for (const int64_t n_tokens : counts) {
      const auto x = random_floats(size_t(n_in * n_tokens), 44 + uint32_t(n_tokens));
      const std::vector<float> alone = outputs_alone(m, x, n_tokens, Isa::Amx);
      std::vector<float> y_ref(alone.size());
      ThreadPool one(1);
      matmul_reference(m.rows.view, x.data(), n_tokens, y_ref.data(), one);
      ASSERT_NO_FATAL_FAILURE(expect_within_reference_bound(m, x, alone, y_ref, n_tokens, Isa::Amx));
      SCOPED_TRACE("n_in " + std::to_string(n_in) + ", " + std::to_string(n_tokens) + " tokens");
      expect_batch_equals_alone(m, x, n_tokens, alone, Isa::Amx);
    }
  }
}

TEST(Interleave, OnlyWholeGroupsOfBlockTypeRows) {
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::I8, TensorType::Q4_K, TensorType::Q6_K}) {
    const int64_t n_in = 2 * block_values(type);
    EXPECT_TRUE(can_interleave(make_weights(type, 16, n_in, 1).view)) << tensor_type_name(type);
    EXPECT_FALSE(can_interleave(make_weights(type, 12, n_in, 1).view)) << tensor_type_name(type);
    EXPECT_FALSE(can_interleave(make_interleaved(type, 16, n_in, 1).view)) << "already interleaved";
  }
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::FP8_E4M3}) {
    EXPECT_TRUE(can_interleave(make_weights(type, 64, 100, 1).view)) << tensor_type_name(type);
    EXPECT_FALSE(can_interleave(make_weights(type, 16, 256, 1).view)) << tensor_type_name(type);  // half a panel
    EXPECT_FALSE(can_interleave(make_interleaved(type, 32, 100, 1).view)) << "already in panels";
    EXPECT_EQ(interleaved_layout(type), WeightLayout::Panel32);
  }
  auto int4 = make_weights(TensorType::F16, 64, 128, 1).view;
  int4.type = TensorType::INT4;  // a type with neither layout
  int4.row_bytes = 64;
  EXPECT_FALSE(can_interleave(int4));
  EXPECT_FALSE(can_interleave(make_weights(TensorType::I8, 16, 72, 1).view));  // rows not whole blocks of 32
  auto with_outliers = make_weights(TensorType::I8, 16, 64, 1);
  with_outliers.view.outlier_threshold = 6.0f;  // LLM.int8() columns are read from the row layout
  EXPECT_FALSE(can_interleave(with_outliers.view));
}

// The later token tiles of a zmm tile column request the next column's blocks into L2 between them: every block
// once, each within the tile's own blocks, whatever the column length and tile count.
TEST(Interleave, LaterTilesRequestEveryBlockOfTheNextColumn) {
  for (int64_t blocks : {1, 2, 3, 7, 8, 16, 63, 64, 65, 96, 176, 256}) {
    for (int64_t n_tiles = 1; n_tiles <= 24; ++n_tiles) {
      std::vector<int> requested(static_cast<size_t>(blocks), 0);
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const kernels::ColumnShare share = kernels::column_share(blocks, tile, n_tiles);
        if (tile == 0) {
          EXPECT_EQ(share.end, share.begin) << "the first tile streams its own column";
        }
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t p = kernels::share_block(share, b);
          if (p >= 0) ++requested[static_cast<size_t>(p)];
        }
      }
      for (int64_t p = 0; p < blocks; ++p) {
        EXPECT_EQ(requested[static_cast<size_t>(p)], n_tiles > 1 ? 1 : 0)
            << "block " << p << " of " << blocks << ", " << n_tiles << " tiles";
      }
    }
  }
}

// A token block's tiles (static_for.h's BalancedTiles): contiguous, every token once, as few tiles as tiles of
// at most the maximum width allow, widths differing by at most one and the wider ones first; and
// for_each_balanced_tile hands each tile's start, index and width, the width as the matching compile-time constant.
template <int N>
void expect_balanced_tiles() {
  for (int64_t n = 0; n <= 100; ++n) {
    const kernels::BalancedTiles<N> tiles(n);
    SCOPED_TRACE(::testing::Message() << n << " tokens, tiles of at most " << N);
    EXPECT_LE(tiles.count * N - N, n - (n > 0 ? 1 : 0)) << "fewer tiles would do";
    EXPECT_GE(tiles.count * N, n);
    int64_t next = 0, narrowest = N, widest = 0;
    for (int64_t i = 0; i < tiles.count; ++i) {
      EXPECT_EQ(tiles.begin(i), next);
      EXPECT_GE(tiles.width(i), 1);
      EXPECT_LE(tiles.width(i), N);
      if (i > 0) {
        EXPECT_LE(tiles.width(i), tiles.width(i - 1));
      }
      narrowest = std::min<int64_t>(narrowest, tiles.width(i));
      widest = std::max(widest, tiles.width(i));
      next += tiles.width(i);
    }
    EXPECT_EQ(next, n);
    if (tiles.count > 0) {
      EXPECT_LE(widest - narrowest, 1);
    }
    int64_t calls = 0;
    kernels::for_each_balanced_tile(tiles, 10, [&](auto width, int64_t start, int64_t index) {
      EXPECT_EQ(index, calls++);
      EXPECT_EQ(start, 10 + tiles.begin(index));
      EXPECT_EQ(int64_t{decltype(width)::value}, tiles.width(index));
    });
    EXPECT_EQ(calls, tiles.count);
  }
}

TEST(Interleave, BalancedTilesCoverATokenBlockInTheFewestEvenTiles) {
  expect_balanced_tiles<1>();
  expect_balanced_tiles<4>();
  expect_balanced_tiles<6>();
  expect_balanced_tiles<7>();
  expect_balanced_tiles<8>();
  expect_balanced_tiles<12>();
  const kernels::BalancedTiles<7> sixteen(16);  // 6, 5 and 5, not 7, 7 and 2
  EXPECT_EQ(sixteen.count, 3);
  EXPECT_EQ(sixteen.width(0), 6);
  EXPECT_EQ(sixteen.width(2), 5);
}

// Q6_K's interleaved block as interleave.h describes it, read byte by byte without the kernels: the 8 rows' fp16
// d first, then 48 vectors of 6-bit values, 4 in 3 bytes, then the scales in 4-byte units. Each value is checked
// against ggml's ql nibble and qh bit pair in the row's own block.
TEST(Interleave, Q6KStoresFourValuesInThreeBytes) {
  constexpr size_t kBlock = 210;
  const int64_t n_out = 16, n_in = 256 * 2;
  const Interleaved m = make_interleaved(TensorType::Q6_K, n_out, n_in, 9);
  for (int64_t r = 0; r < n_out; ++r) {
    const int64_t g = r / 8, l = r % 8;
    for (int64_t b = 0; b < n_in / 256; ++b) {
      const uint8_t* row = m.rows.view.row(r) + b * kBlock;
      const uint8_t* blk = m.data.data() + size_t(g) * 8 * m.view.row_bytes + size_t(b) * 8 * kBlock;
      const uint8_t* vectors = blk + 16;
      ASSERT_EQ(0, std::memcmp(blk + 2 * l, row + 208, 2)) << "d of row " << r;
      for (int s = 0; s < 4; ++s) ASSERT_EQ(0, std::memcmp(vectors + 32 * (48 + s) + 4 * l, row + 192 + 4 * s, 4));
      for (int v = 0; v < 256; ++v) {
        const int n = v / 128, quarter = v % 128 / 32, i = v % 32;
        const uint8_t ql = row[64 * n + 32 * (quarter % 2) + i], qh = row[128 + 32 * n + i];
        const int expected = (quarter < 2 ? ql & 0x0f : ql >> 4) | ((qh >> (2 * quarter)) & 3) << 4;
        const int vector = v / 4, k = vector / 4, j = vector % 4, byte = 4 * int(l) + v % 4;
        int stored = 0;
        if (j < 3) {
          stored = vectors[32 * (3 * k + j) + byte] & 0x3f;
        } else {
          for (int p = 0; p < 3; ++p) stored |= (vectors[32 * (3 * k + p) + byte] >> 6) << (2 * p);
        }
        ASSERT_EQ(stored, expected) << "row " << r << ", super-block " << b << ", value " << v;
      }
    }
  }
}

class InterleaveType : public ::testing::TestWithParam<TensorType> {};

TEST_P(InterleaveType, KeepsEveryByteAndRowsReadBack) {
  const int64_t n_out = 3 * unit_rows(GetParam()), n_in = block_values(GetParam()) * 7;
  const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 3);
  EXPECT_NE(m.data, m.rows.data);  // the layout did change
  ASSERT_EQ(m.data.size(), m.rows.data.size());
  if (GetParam() != TensorType::Q6_K) {  // which repacks its 6-bit values into as many bytes; the others move bytes
    std::vector<uint8_t> sorted_before = m.rows.data, sorted_after = m.data;
    std::sort(sorted_before.begin(), sorted_before.end());
    std::sort(sorted_after.begin(), sorted_after.end());
    EXPECT_EQ(sorted_before, sorted_after);
  }
  std::vector<uint8_t> row(m.view.row_bytes);
  std::vector<float> values(static_cast<size_t>(n_in)), expected(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    deinterleave_row(m.view, r, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), m.rows.view.row(r), row.size())) << "row " << r;
    dequantize_weight_row(m.view, r, values.data());
    dequantize_weight_row(m.rows.view, r, expected.data());
    ASSERT_EQ(values, expected) << "row " << r;
  }
}

// At every ISA level: within the reference bound, and each token's outputs bit-identical alone or in any batch,
// with 1, 2 or 3 threads (so splits fall on different groups), K with a tail after whole groups of 8 blocks.
TEST_P(InterleaveType, MatmulMatchesReferenceAndIsBatchInvariant) {
  // Panels: 672 values run in two chunks of k (512 + 160) from 5 tokens on, and 1-4 tokens read in place.
  // Batches from 5 tokens (Q4_K) and 3 (Q6_K) take the K-quants' 512-bit tiles (matmul_kquant_avx512.cpp); 2-17
  // tokens take tiles of 2 to 8 tokens (static_for.h's BalancedTiles; 1-token tiles:
  // TokenBlocksOfLongRowsGiveTheSameBits).
  const int64_t n_in = block_values(GetParam()) == 256 ? 256 * 5 : 32 * 21, n_max = 17;
  const int64_t n_out = is_panel(GetParam()) ? kPanelRows * 9 : 8 * 37;
  const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 5);
  auto x = random_floats(size_t(n_max * n_in), 6);
  for (int64_t t = 0; t < n_max; ++t)
    for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= float(1 + t % 5) * (t % 3 == 0 ? 100.0f : 0.01f);
  ThreadPool one(1), two(2), three(3);
  std::vector<float> y_ref(size_t(n_max * n_out));
  matmul_reference(m.rows.view, x.data(), n_max, y_ref.data(), one);
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    const std::vector<float> alone = outputs_alone(m, x, n_max, isa);
    ASSERT_NO_FATAL_FAILURE(expect_within_reference_bound(m, x, alone, y_ref, n_max, isa));
    std::vector<float> y(alone.size());
    for (ThreadPool* pool : {&one, &two, &three}) {
      for (int64_t n = 2; n <= n_max; ++n) {
        const int64_t first = (n * 5) % (n_max - n + 1);
        std::fill(y.begin(), y.end(), 0.0f);
        matmul(m.view, &x[first * n_in], n, y.data(), *pool, isa);
        ASSERT_EQ(0, std::memcmp(y.data(), &alone[first * n_out], sizeof(float) * size_t(n * n_out)))
            << isa_name(isa) << ": batch of " << n << " from token " << first << ", " << pool->size() << " threads";
      }
    }
  }
}

// Long rows make the kernels take tokens in blocks (activations sized for L2: 24-30 tokens for 6400 values), so
// batches of 25-33 end with a block of 1, 2 or 3 tokens for each tile width (8: I8 and the K-quants' wide tiles,
// 7: Q8_0, 6: Q4_0), tiles no batch of one block takes; the K-quants also run rows of 12544 values, too long for
// their wide tiles (blocks of 12 in 4-token tiles). Every token still gets the bits it gets alone.
TEST_P(InterleaveType, TokenBlocksOfLongRowsGiveTheSameBits) {
  std::vector<int64_t> row_lengths = {32 * 200};  // 25 K-quant super-blocks
  if (block_values(GetParam()) == 256) row_lengths.push_back(256 * 49);
  for (const int64_t n_in : row_lengths) {
    const int64_t n_out = 2 * unit_rows(GetParam());
    const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 15);
    for (const int64_t n_tokens : {25, 26, 27, 29, 30, 31, 32, 33}) {
      SCOPED_TRACE(::testing::Message() << n_tokens << " tokens of " << n_in << " values");
      const auto x = random_floats(size_t(n_tokens * n_in), 16);
      for (const Isa isa : kernel_isas()) {
        if (isa > detected_isa()) continue;
        expect_batch_equals_alone(m, x, n_tokens, outputs_alone(m, x, n_tokens, isa), isa);
      }
    }
  }
}

// Rows handed out in chunks (matmul_shared_input: whole 32-row columns, several per thread, taken by whichever
// thread is free) over activations in several token blocks (long rows): a thread computes many chunks, each
// reading the packed activations it kept for every block, and a second target of the same input reads them too;
// the next product, of other activations at the same addresses, must not read them. Every token gets the bits it
// gets alone, on 2 and 3 threads.
TEST_P(InterleaveType, RowChunksOverTokenBlocksGiveTheSameBits) {
  const int64_t n_in = block_values(GetParam()) == 256 ? 256 * 25 : 32 * 200, n_tokens = 31;
  const int64_t n_out = is_panel(GetParam()) ? kPanelRows * 9 : 8 * 37;
  const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 45);
  const auto x = random_floats(size_t(n_tokens * n_in), 46), x2 = random_floats(size_t(n_tokens * n_in), 47);
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa), alone2 = outputs_alone(m, x2, n_tokens, isa);
    for (const int threads : {2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(alone.size()), y_second(alone.size());
      const MatmulTarget targets[] = {{&m.view, y.data()}, {&m.view, y_second.data()}};
      matmul_shared_input(targets, x.data(), n_tokens, pool, isa);
      const std::string where = std::string(isa_name(isa)) + ", " + std::to_string(threads) + " threads";
      EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size())) << where;
      EXPECT_EQ(0, std::memcmp(y_second.data(), alone.data(), sizeof(float) * y.size())) << where << ", second target";
      matmul(m.view, x2.data(), n_tokens, y.data(), pool, isa);
      EXPECT_EQ(0, std::memcmp(y.data(), alone2.data(), sizeof(float) * y.size())) << where << ", next product";
    }
  }
}

// Batches wide enough for every 512-bit tile and several token tiles per column: 36 to 43 tokens in BalancedTiles
// of at most 4, 6, 7 or 8 tokens (one width or two), and 5 groups or panels an odd one out, which the 512-bit
// drivers hand to their 256-bit tiles. Each token meets the reference bound and gets the bits it gets alone, with
// 1 and 2 threads.
TEST_P(InterleaveType, WideBatchesMatchReferenceAndGiveTheSameBits) {
  const int64_t n_in = block_values(GetParam()) == 256 ? 256 * 3 : 32 * 13;
  const int64_t n_out = 5 * unit_rows(GetParam());
  const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 27);
  ThreadPool one(1);
  for (int64_t n_tokens = 36; n_tokens <= 43; ++n_tokens) {
    const auto x = random_floats(size_t(n_tokens * n_in), 28);
    std::vector<float> y_ref(size_t(n_tokens * n_out));
    matmul_reference(m.rows.view, x.data(), n_tokens, y_ref.data(), one);
    for (const Isa isa : kernel_isas()) {
      if (isa > detected_isa()) continue;
      SCOPED_TRACE(n_tokens);
      const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa);
      ASSERT_NO_FATAL_FAILURE(expect_within_reference_bound(m, x, alone, y_ref, n_tokens, isa));
      expect_batch_equals_alone(m, x, n_tokens, alone, isa);
    }
  }
}

// Panels take a prompt in blocks of 120 (AVX2) or 180 tokens (AVX-512) and chunks of 512 or 2048 k (a whole row
// up to 640 or 2560): 190 tokens end with a block of 70 or 10, narrower tiles, and rows of 2600 take several
// chunks at both levels. Every token still gets the bits it gets alone, and the AVX2 and AVX-512 tiles (8 and 16
// lanes, other tile shapes, other chunks) give the same bits as each other, every element being one FMA chain
// over k in order.
TEST(InterleavePanels, TokenBlocksAndVectorWidthsGiveTheSameBits) {
  for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::FP8_E4M3}) {
    for (const int64_t n_in : {100, 2600}) {
      const int64_t n_out = 2 * kPanelRows, n_tokens = 190;
      const Interleaved m = make_interleaved(type, n_out, n_in, 35);
      const auto x = random_floats(size_t(n_tokens * n_in), 36);
      std::vector<float> first;
      for (const Isa isa : kernel_isas()) {
        if (isa == Isa::Scalar || isa > detected_isa()) continue;
        const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa);
        expect_batch_equals_alone(m, x, n_tokens, alone, isa);
        if (first.empty()) {
          first = alone;
        } else {
          EXPECT_EQ(0, std::memcmp(first.data(), alone.data(), sizeof(float) * alone.size()))
              << tensor_type_name(type) << ", n_in " << n_in << ": " << isa_name(isa)
              << " differs from the 256-bit tiles";
        }
      }
    }
  }
}

// BF16 panels with bf16 products (WeightMatrix::bf16_products), at the levels with AVX-512 BF16 (vdpbf16ps) or
// AMX (tiles): each element within fp32 rounding of the stored weights times the activations rounded to bf16
// (and not of the unrounded activations, which the fp32 path multiplies), and bit-identical alone or in any batch
// or thread split, for an even n_in, odd ones (the last k paired with zero, and at the AMX level a step padded
// with zero pairs) and one longer than a chunk of pairs (2048 pairs, or a whole row up to 2560), over more
// tokens than a block (180: a block of 10 follows, with one narrower tile) and than the AMX tiles' pass (5125
// values: 64 tokens a pass, the last tile 14 tokens). A batch of fewer than 16 tokens takes AMX tiles of that
// many rows.
TEST(InterleavePanels, Bf16ProductsRoundTheActivationsAndKeepBatchInvariance) {
  if (detected_isa() < Isa::Avx512Bf16) GTEST_SKIP() << "no AVX-512 BF16";
  for (const Isa isa : {Isa::Avx512Bf16, Isa::Amx}) {
    if (isa > detected_isa()) continue;
    SCOPED_TRACE(isa_name(isa));
    for (const int64_t n_in : {96, 101, 1030, 5125}) {
      const int64_t n_out = 3 * kPanelRows, n_tokens = 190;
      const Interleaved m = make_bf16_product_panels(n_out, n_in, uint32_t(40 + n_in));
      const auto x = random_floats(size_t(n_tokens * n_in), 41);
      const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa);
      expect_batch_equals_alone(m, x, n_tokens, alone, isa);
      ThreadPool pool(2);
      // The direct tiles (2-4 tokens), the packed one's remainders, and AMX tiles of 2-15 rows, one of 16, and 17.
      for (const int64_t batch : {2, 3, 4, 5, 13, 16, 17}) {
        std::vector<float> y(size_t(batch * n_out));
        matmul(m.view, x.data(), batch, y.data(), pool, isa);
        EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size())) << "n_in " << n_in << ", " << batch;
      }
      int64_t far_from_fp32 = 0;
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t o = 0; o < n_out; ++o) {
          double rounded = 0, exact = 0, magnitude = 0;
          for (int64_t i = 0; i < n_in; ++i) {
            const double w = m.rows.dequantized[o * n_in + i], xi = x[t * n_in + i];
            rounded += w * bf16_to_fp32(fp32_to_bf16(x[t * n_in + i]));
            exact += w * xi;
            magnitude += std::abs(w * xi);
          }
          const double bound = 1e-6 * magnitude;
          ASSERT_NEAR(alone[t * n_out + o], rounded, bound) << "n_in " << n_in << ", token " << t << ", row " << o;
          far_from_fp32 += std::abs(alone[t * n_out + o] - exact) > bound;
        }
      }
      EXPECT_GT(far_from_fp32, n_tokens * n_out / 2) << "n_in " << n_in << ": the activations were not rounded";
    }
  }
}

// BF16 panels in pair order (interleave.h): every value where the layout says (a pair word's low half for the even
// k, its high half for the odd one, an odd n_in's last k in a slice of 32 rows), and rows read back as stored.
TEST(InterleavePanels, Bf16PairOrderPutsEveryValueWhereTheLayoutSays) {
  for (const int64_t n_in : {2, 7, 100, 101}) {
    const int64_t n_out = 2 * kPanelRows;
    const Interleaved slices = make_interleaved(TensorType::BF16, n_out, n_in, uint32_t(80 + n_in));
    const Interleaved m = make_bf16_product_panels(n_out, n_in, uint32_t(80 + n_in));
    ASSERT_EQ(m.rows.data, slices.rows.data);
    const size_t panel_bytes = size_t(kPanelRows * n_in * 2);
    for (int64_t r = 0; r < n_out; ++r) {
      const int64_t l = r % kPanelRows;
      const uint8_t* panel = m.data.data() + size_t(r / kPanelRows) * panel_bytes;
      for (int64_t k = 0; k < n_in; ++k) {
        const size_t at = k + 1 < n_in || n_in % 2 == 0 ? size_t((k / 2) * 128 + l * 4 + (k % 2) * 2)
                                                          : size_t(k * 64 + l * 2);
        ASSERT_EQ(0, std::memcmp(panel + at, m.rows.view.row(r) + 2 * k, 2))
            << "n_in " << n_in << ", row " << r << ", k " << k;
      }
    }
    std::vector<uint8_t> row(m.view.row_bytes);
    for (int64_t r = 0; r < n_out; ++r) {
      deinterleave_row(m.view, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), m.rows.view.row(r), row.size())) << "n_in " << n_in << ", row " << r;
    }
  }
}

// The fp32 path at the levels without AVX-512 BF16 reads panels in pair order (a matrix loaded for bf16 products
// on a machine whose kernels are then capped lower) with the same FMA chains as slices: the same bits, for the
// direct tiles, the packed ones over several chunks and an odd n_in's last k, alone or in a later chunk (2601).
TEST(InterleavePanels, Bf16PairOrderGivesTheFp32PathTheSameBits) {
  for (const int64_t n_in : {100, 101, 2600, 2601}) {
    const int64_t n_out = 3 * kPanelRows;
    const Interleaved slices = make_interleaved(TensorType::BF16, n_out, n_in, uint32_t(90 + n_in));
    const Interleaved pairs = make_bf16_product_panels(n_out, n_in, uint32_t(90 + n_in));
    for (const Isa isa : kernel_isas()) {
      if (isa >= Isa::Avx512Bf16 || isa > detected_isa()) continue;
      ThreadPool pool(2);
      for (const int64_t n_tokens : {1, 2, 3, 4, 5, 17, 190}) {
        const auto x = random_floats(size_t(n_tokens * n_in), 91 + uint32_t(n_tokens));
        std::vector<float> a(size_t(n_tokens * n_out)), b(a.size());
        matmul(slices.view, x.data(), n_tokens, a.data(), pool, isa);
        matmul(pairs.view, x.data(), n_tokens, b.data(), pool, isa);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size()))
            << isa_name(isa) << ", n_in " << n_in << ", " << n_tokens << " tokens";
      }
    }
  }
}

// The AMX-BF16 tiles' passes over the batch (as many token tiles as keep their activations in L2): passes of 4
// tiles ending with one of 1 (n_in 5125, 130 tokens), of 3 with an odd tile whose sums wait in memory between
// chunks (33-48 tokens), rows so long that a pass is 2 tiles whose sums stay in the C tiles (n_in 12289), and
// rows shorter than one step (n_in 31): every token gets the bits it gets alone, on 1-3 threads.
TEST(InterleavePanels, Bf16AmxTilePassesKeepBatchInvariance) {
  if (detected_isa() < Isa::Amx) GTEST_SKIP() << "no AMX";
  for (const int64_t n_in : {31, 5125, 12289}) {
    const int64_t n_out = 2 * kPanelRows, n_tokens = 130;
    const Interleaved m = make_bf16_product_panels(n_out, n_in, uint32_t(60 + n_in));
    const auto x = random_floats(size_t(n_tokens * n_in), 61);
    const std::vector<float> alone = outputs_alone(m, x, n_tokens, Isa::Amx);
    for (const int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (const int64_t batch : {32, 33, 48, 65, 80, 130}) {
        std::vector<float> y(size_t(batch * n_out));
        matmul(m.view, x.data(), batch, y.data(), pool, Isa::Amx);
        EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size()))
            << "n_in " << n_in << ", " << batch << " tokens, " << threads << " threads";
      }
    }
  }
}

// The activations' rounding into the AMX-BF16 tiles' layout (bf16_tile_layout.h), split over token ranges as the
// threads split it: every token's pairs where Bf16Tiles puts them (zero past the row), the last tile's rows past
// the batch zero, every word of Bf16Tiles::words() written and none past it. Plain AVX-512 code: it also runs in
// the emulated AVX-512 build.
TEST(InterleavePanels, Bf16TileRoundingPutsEveryTokenWhereTheLayoutSays) {
  if (detected_isa() < Isa::Avx512Bf16) GTEST_SKIP() << "no AVX-512 BF16";
  constexpr uint32_t kCanary = 0xdeadbeefu;
  for (const int64_t n_in : {31, 101, 2600}) {
    for (const int64_t n_tokens : {1, 5, 16, 17, 40}) {
      SCOPED_TRACE("n_in " + std::to_string(n_in) + ", " + std::to_string(n_tokens) + " tokens");
      const auto x = random_floats(size_t(n_tokens * n_in), 70 + uint32_t(n_in));
      const kernels::Bf16Tiles tiles(n_in, n_tokens);
      const size_t slack = 64;
      std::vector<uint32_t> out(tiles.words() + slack, kCanary);
      const int64_t cut1 = n_tokens / 3, cut2 = 2 * n_tokens / 3;
      for (const auto& [b, e] : {std::pair{cut1, cut2}, std::pair{int64_t{0}, cut1}, std::pair{cut2, n_tokens}}) {
        if (b < e) kernels::avx512::round_to_bf16_tiles(x.data(), n_in, n_tokens, b, e, out.data());
      }
      ASSERT_EQ(std::count(out.begin(), out.begin() + ptrdiff_t(tiles.words()), kCanary), 0);
      ASSERT_EQ(std::count(out.begin() + ptrdiff_t(tiles.words()), out.end(), kCanary), ptrdiff_t(slack));
      const auto bf16_at = [&](int64_t t, int64_t k) -> uint32_t {
        return t < n_tokens && k < n_in ? fp32_to_bf16(x[size_t(t * n_in + k)]) : 0;
      };
      for (int64_t t = 0; t < tiles.padded_tokens(); ++t) {
        for (int64_t s = 0; s < tiles.steps; ++s) {
          for (int64_t p = 0; p < kernels::Bf16Tiles::kStepPairs; ++p) {
            const int64_t k = 2 * (s * kernels::Bf16Tiles::kStepPairs + p);
            ASSERT_EQ(out[tiles.row_at(t, s) + size_t(p)], bf16_at(t, k) | bf16_at(t, k + 1) << 16)
                << "token " << t << ", k " << k;
          }
        }
      }
    }
  }
}

// --bf16-products' rounding of F16 weights: every F16 bit pattern (on zmm where the CPU has AVX-512 BF16) gives
// what the scalar conversions give, a NaN stays a NaN, and a tail shorter than a vector writes nothing past it.
TEST(InterleavePanels, F16WeightsRoundToBf16AsTheScalarConversions) {
  const size_t n = 65536 + 5;  // all patterns, then 5 more in a masked tail
  std::vector<uint16_t> data(n + 16);  // a guard past every lane of the last masked vector
  for (size_t i = 0; i < n; ++i) data[i] = uint16_t(i * 40503u);  // an odd multiplier: a permutation of 2^16
  const uint16_t guard = 0xabcd;
  for (size_t i = n; i < data.size(); ++i) data[i] = guard;
  const std::vector<uint16_t> before = data;
  round_f16_to_bf16(reinterpret_cast<uint8_t*>(data.data()), n);
  for (size_t i = 0; i < n; ++i) {
    const float value = fp16_to_fp32(before[i]);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(data[i]))) << std::hex << before[i];
    } else {
      ASSERT_EQ(data[i], fp32_to_bf16(value)) << std::hex << before[i];
    }
  }
  for (size_t i = n; i < data.size(); ++i) EXPECT_EQ(data[i], guard);
}

// Activations far below the smallest normal float (a block or row quantized to zero) and ordinary ones side by
// side: each token gets the bits it gets alone, at every ISA level (the 512-bit tiles also read the activation
// sums, which must agree with the stored bytes).
TEST_P(InterleaveType, TinyActivationsGiveTheSameBitsInBatches) {
  const int64_t n_in = block_values(GetParam()) == 256 ? 512 : 96, n_out = 64, n_tokens = 9;
  const Interleaved m = make_interleaved(GetParam(), n_out, n_in, 25);
  auto x = random_floats(size_t(n_tokens * n_in), 26);
  for (int64_t t = 0; t < n_tokens; t += 2)
    for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= 1e-40f;
  ThreadPool one(1);
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    const std::vector<float> alone = outputs_alone(m, x, n_tokens, isa);
    std::vector<float> y(alone.size());
    matmul(m.view, x.data(), n_tokens, y.data(), one, isa);
    EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size())) << isa_name(isa);
  }
}

// Each set of matrices in one matmul_shared_input call gives what separate calls give, at every ISA level, with
// 1-3 threads, for each token count (inputs drawn from seed + n_tokens).
void expect_sets_share_input(const std::vector<std::vector<const WeightMatrix*>>& sets, int64_t n_in,
                             std::initializer_list<int64_t> token_counts, uint32_t seed, const std::string& label) {
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    for (const int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (const int64_t n_tokens : token_counts) {
        const auto x = random_floats(size_t(n_tokens * n_in), seed + uint32_t(n_tokens));
        for (size_t s = 0; s < sets.size(); ++s)
          testing::expect_shared_input_equals_separate(sets[s], x, n_tokens, pool, isa, label + " " + std::to_string(s));
      }
    }
  }
}

// Interleaved q, k, v share one quantization and parallel region with each other and with row-layout matrices
// of the same activation format; a target whose rows are not whole groups sends the set down separate calls.
TEST(Interleave, SharedInputEqualsSeparateCalls) {
  const int64_t n_in = 32 * 9;
  const Interleaved q = make_interleaved(TensorType::Q4_0, 64, n_in, 7);
  const Interleaved k = make_interleaved(TensorType::Q4_0, 16, n_in, 8);
  const Interleaved v = make_interleaved(TensorType::Q8_0, 16, n_in, 12);
  const Interleaved i8 = make_interleaved(TensorType::I8, 32, n_in, 13);
  const auto i8_rows = make_weights(TensorType::I8, 8, n_in, 14);
  const auto q8 = make_weights(TensorType::Q8_0, 24, n_in, 9), odd = make_weights(TensorType::Q4_0, 13, n_in, 10);
  expect_sets_share_input({{&q.view, &k.view, &v.view},
                           {&q.view, &q8.view},
                           {&q.view, &odd.view, &k.view},
                           {&v.view, &v.view},
                           {&i8.view, &i8_rows.view, &i8.view}},
                          n_in, {1, 6}, 11, "set");
}

// Panel q, k and v share one parallel region (split at panels) with each other and with float matrices left in
// rows; a target that is not whole panels with them, or FP8 left in rows (the lowbit kernels), sends the set down
// separate calls.
TEST(Interleave, PanelSetsShareOneInput) {
  const int64_t n_in = 96;
  const Interleaved q = make_interleaved(TensorType::F16, 128, n_in, 27);
  const Interleaved k = make_interleaved(TensorType::F16, 32, n_in, 28);
  const Interleaved v = make_interleaved(TensorType::BF16, 32, n_in, 29);
  const Interleaved f8 = make_interleaved(TensorType::FP8_E4M3, 64, n_in, 33);
  const auto rows = make_weights(TensorType::F16, 64, n_in, 30), odd = make_weights(TensorType::F32, 24, n_in, 31);
  const auto f8_rows = make_weights(TensorType::FP8_E4M3, 32, n_in, 34);
  expect_sets_share_input({{&q.view, &k.view, &v.view},
                           {&q.view, &rows.view},
                           {&k.view, &odd.view, &v.view},
                           {&f8.view, &q.view, &f8.view},
                           {&f8.view, &f8_rows.view}},
                          n_in, {1, 3, 7, 13}, 32, "panel set");
}

// BF16 panels with bf16 products share one rounding of the activations and one parallel region; beside F16 panels
// or BF16 ones without them (fp32 activations) the set runs as separate calls, with the same bits. At the levels
// that have them: AVX-512 BF16 and AMX (one rounding into the AMX tiles' layout for the whole set there).
TEST(Interleave, Bf16ProductSetsShareOneInput) {
  if (detected_isa() < Isa::Avx512Bf16) GTEST_SKIP() << "no AVX-512 BF16";
  const int64_t n_in = 98;
  const Interleaved q = make_bf16_product_panels(128, n_in, 37);
  const Interleaved k = make_bf16_product_panels(32, n_in, 38);
  const Interleaved plain = make_interleaved(TensorType::BF16, 64, n_in, 39);
  const Interleaved f16 = make_interleaved(TensorType::F16, 32, n_in, 42);
  const std::vector<std::vector<const WeightMatrix*>> sets = {
      {&q.view, &k.view, &k.view}, {&q.view, &plain.view}, {&k.view, &f16.view, &q.view}};
  for (const Isa isa : {Isa::Avx512Bf16, Isa::Amx}) {
    if (isa > detected_isa()) continue;
    for (const int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (const int64_t n_tokens : {1, 4, 5, 13, 17, 40}) {
        const auto x = random_floats(size_t(n_tokens * n_in), 43 + uint32_t(n_tokens));
        for (size_t s = 0; s < sets.size(); ++s) {
          testing::expect_shared_input_equals_separate(sets[s], x, n_tokens, pool, isa,
                                                       std::string(isa_name(isa)) + " bf16 set " + std::to_string(s));
        }
      }
    }
  }
}

// A Q4_K_M file's attention: Q4_K q and k beside a Q6_K v, two activation formats (one scale per 256 values and
// per 32) in one parallel region; and a set with a Q6_K matrix left in the row layout.
TEST(Interleave, KQuantSetsShareOneInput) {
  const int64_t n_in = 256 * 3;
  const Interleaved q = make_interleaved(TensorType::Q4_K, 32, n_in, 17);
  const Interleaved k = make_interleaved(TensorType::Q4_K, 8, n_in, 18);
  const Interleaved v = make_interleaved(TensorType::Q6_K, 8, n_in, 19);
  const auto v_rows = make_weights(TensorType::Q6_K, 16, n_in, 22);
  expect_sets_share_input({{&q.view, &k.view, &v.view}, {&q.view, &v_rows.view, &v.view}}, n_in, {1, 5, 9}, 20,
                          "k-quant set");
}

INSTANTIATE_TEST_SUITE_P(Types, InterleaveType,
                         ::testing::Values(TensorType::Q4_0, TensorType::Q8_0, TensorType::I8, TensorType::Q4_K,
                                           TensorType::Q6_K, TensorType::F32, TensorType::F16, TensorType::BF16,
                                           TensorType::FP8_E4M3),
                         [](const auto& info) { return std::string(tensor_type_name(info.param)); });

// A thread's token range over the tiles' order: every token once, whole tiles only where the range holds them
// (a thread writing a whole tile that another thread's range shares would race with it), the rest one by one.
TEST(TileOrder, ATokenRangeVisitsWholeTilesOnlyInsideIt) {
  const kernels::TileOrder order{190, 100, 2048, 180, 12};  // blocks of 180 and 10: tiles of 12 and one of 10
  for (int64_t b = 0; b <= 190; ++b) {
    for (int64_t e = b; e <= 190; ++e) {
      std::vector<int> seen(190, 0);
      order.for_each_tile_in(
          b, e,
          [&](int64_t tt, int64_t nt) {
            ASSERT_EQ(order.tile_of(tt), tt);
            ASSERT_EQ(order.tokens_of_tile(tt), nt);
            ASSERT_TRUE(b <= tt && tt + nt <= e) << b << ".." << e << ": tile " << tt;
            for (int64_t t = tt; t < tt + nt; ++t) ++seen[t];
          },
          [&](int64_t t) {
            const int64_t tt = order.tile_of(t);
            ASSERT_TRUE(b <= t && t < e);
            ASSERT_TRUE(tt < b || tt + order.tokens_of_tile(tt) > e) << b << ".." << e << ": token " << t;
            ++seen[t];
          });
      for (int64_t t = 0; t < 190; ++t) ASSERT_EQ(seen[t], t >= b && t < e ? 1 : 0) << b << ".." << e << ": " << t;
    }
  }
}

// The activations' preparation for the panel tiles, called for one thread's token range: it writes exactly that
// range's words of the whole call's result (the count of words it touches is the range's), nothing past the end,
// for ranges that start and end mid-tile, in the short last block, and rows whose chunks end with part of a run.
TEST(TileOrder, PackingARangeWritesExactlyItsTokensWords) {
  using Pack = std::function<void(const float*, int64_t, int64_t, int64_t, int64_t, uint32_t*)>;
  struct Level {
    const char* name;
    Isa isa;
    int64_t (*words)(int64_t n_in);
    Pack pack;
  };
  const auto floats = [](int64_t n_in) { return n_in; };
  const auto pairs = [](int64_t n_in) { return (n_in + 1) / 2; };
  const auto as_floats = [](auto f) {
    return [f](const float* x, int64_t n_in, int64_t n, int64_t b, int64_t e, uint32_t* out) {
      f(x, n_in, n, b, e, reinterpret_cast<float*>(out));
    };
  };
  const Level levels[] = {{"avx2 panels", Isa::Avx2, floats, as_floats(kernels::avx2::pack_panel_acts)},
                          {"avx512 panels", Isa::Avx512Vnni, floats, as_floats(kernels::avx512::pack_panel_acts)},
                          {"avx512 bf16 pairs", Isa::Avx512Bf16, pairs, kernels::avx512::round_to_bf16}};
  constexpr uint32_t kCanary = 0xdeadbeefu;  // no float in [-1, 1], nor two bf16 of them
  const int64_t n_tokens = 190, points[] = {0, 5, 12, 13, 95, 179, 180, 185, 190};
  for (const Level& level : levels) {
    if (detected_isa() < level.isa) continue;
    for (const int64_t n_in : {100, 101, 2600}) {
      SCOPED_TRACE(std::string(level.name) + ", n_in " + std::to_string(n_in));
      const auto x = random_floats(size_t(n_tokens * n_in), 50 + uint32_t(n_in));
      const size_t n_words = size_t(n_tokens * level.words(n_in)), slack = 64;
      std::vector<uint32_t> whole(n_words + slack, kCanary);
      level.pack(x.data(), n_in, n_tokens, 0, n_tokens, whole.data());
      ASSERT_EQ(std::count(whole.begin(), whole.begin() + n_words, kCanary), 0);
      ASSERT_EQ(std::count(whole.begin() + n_words, whole.end(), kCanary), ptrdiff_t(slack));
      for (const int64_t b : points) {
        for (const int64_t e : points) {
          if (e <= b) continue;
          std::vector<uint32_t> part(n_words + slack, kCanary);
          level.pack(x.data(), n_in, n_tokens, b, e, part.data());
          size_t written = 0;
          for (size_t i = 0; i < part.size(); ++i) {
            if (part[i] == kCanary) continue;
            ++written;
            ASSERT_EQ(part[i], whole[i]) << b << ".." << e << ": word " << i;
          }
          EXPECT_EQ(written, size_t((e - b) * level.words(n_in))) << b << ".." << e;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera
