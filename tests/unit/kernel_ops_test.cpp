// rms_norm, rope, softmax, swiglu and attention at every ISA level the CPU has, against the scalar reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace tessera {
namespace {

using testing::random_floats;

// Sizes with vector tails of every length, and one long row.
const int64_t kSizes[] = {1, 3, 7, 8, 9, 16, 31, 33, 1000};

// |a - b| ≤ rel · |b| + abs, reported with the index.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rel, double abs, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], rel * std::fabs(b[i]) + abs) << what << " at " << i << " of " << a.size();
}

class KernelOps : public ::testing::TestWithParam<Isa> {};

TEST_P(KernelOps, RmsNorm) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (int64_t n : kSizes) {
    const auto x = random_floats(size_t(n), 1, 3.0f), w = random_floats(size_t(n), 2);
    std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    rms_norm(x.data(), w.data(), 1e-5f, n, out.data(), GetParam());
    rms_norm(x.data(), w.data(), 1e-5f, n, ref.data(), Isa::Scalar);
    // The sum of squares is the only long reduction: n·eps relative.
    expect_close(out, ref, 1e-6 + 2e-7 * double(n), 0.0, "rms_norm");
    auto in_place = x;
    rms_norm(in_place.data(), w.data(), 1e-5f, n, in_place.data(), GetParam());
    EXPECT_EQ(in_place, out);
  }
}

TEST_P(KernelOps, Softmax) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (int64_t n : kSizes) {
    auto x = random_floats(size_t(n), 3, 4.0f);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity();  // a masked position
    auto ref = x;
    softmax(x.data(), n, GetParam());
    softmax(ref.data(), n, Isa::Scalar);
    expect_close(x, ref, 1e-5, 1e-9, "softmax");
    if (n > 2) {
      EXPECT_EQ(x[1], 0.0f);
    }
  }
}

TEST_P(KernelOps, SwiGlu) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (int64_t n : kSizes) {
    auto gate = random_floats(size_t(n), 4, 5.0f);
    if (n > 3) gate[0] = -100.0f, gate[1] = 100.0f, gate[2] = 0.0f;  // saturated sigmoid both ways
    const auto up = random_floats(size_t(n), 5);
    std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    swiglu(gate.data(), up.data(), n, out.data(), GetParam());
    swiglu(gate.data(), up.data(), n, ref.data(), Isa::Scalar);
    expect_close(out, ref, 2e-6, 1e-30, "swiglu");
  }
}

TEST_P(KernelOps, AddIsExactAndAliasFree) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (int64_t n : kSizes) {
    auto x = random_floats(size_t(n), 6, 3.0f);
    const auto y = random_floats(size_t(n), 7, 3.0f);
    auto ref = x;
    add(x.data(), y.data(), n, GetParam());
    for (int64_t i = 0; i < n; ++i) ref[size_t(i)] += y[size_t(i)];
    EXPECT_EQ(x, ref) << n;  // one float addition per element: the same bits at every level
  }
}

TEST_P(KernelOps, Rope) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::NeoX}) {
    for (int64_t head_dim : {6, 20, 64, 128}) {
      const int64_t n_heads = 3;
      std::vector<float> inv_freq(size_t(head_dim / 2));
      for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(head_dim));
      for (int64_t position : {0, 1, 17, 4095}) {
        auto x = random_floats(size_t(n_heads * head_dim), uint32_t(6 + position));
        auto ref = x, pre = x;
        rope(x.data(), n_heads, head_dim, position, inv_freq.data(), layout, GetParam());
        rope(ref.data(), n_heads, head_dim, position, inv_freq.data(), layout, Isa::Scalar);
        // Each output is a two-term sum: a few ulp of the inputs' magnitude.
        expect_close(x, ref, 1e-6, 1e-6, "rope");
        std::vector<float> c(inv_freq.size()), s(inv_freq.size());
        rope_cos_sin(position, inv_freq.data(), int64_t(inv_freq.size()), c.data(), s.data());
        rope_precomputed(pre.data(), n_heads, head_dim, c.data(), s.data(), layout, GetParam());
        EXPECT_EQ(pre, x);
      }
    }
  }
}

// K/V blocks encoded in one storage type, laid out like KvPool: rows, then per-(row, head) scales.
struct EncodedBlocks {
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<const uint8_t*> ptrs;
  int64_t scales_offset = 0;
};

EncodedBlocks encode_blocks(KvType type, const std::vector<float>& values, int64_t n_blocks, int64_t block_size,
                            int64_t n_head_kv, int64_t head_dim, const std::vector<int64_t>& order) {
  EncodedBlocks e;
  const int64_t kv_row = n_head_kv * head_dim;
  const int64_t row_bytes = kv_row * kv_element_bytes(type);
  e.scales_offset = block_size * row_bytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    e.blocks.emplace_back(size_t(block_size * (row_bytes + n_head_kv * 4)));
    for (int64_t r = 0; r < block_size; ++r) {
      auto* scales = reinterpret_cast<float*>(e.blocks.back().data() + e.scales_offset) + r * n_head_kv;
      encode_kv_row(type, &values[size_t((b * block_size + r) * kv_row)], n_head_kv, head_dim,
                    e.blocks.back().data() + r * row_bytes, scales);
    }
  }
  for (int64_t b : order) e.ptrs.push_back(e.blocks[size_t(b)].data());
  return e;
}

TEST_P(KernelOps, AttentionOverBlocksForEveryKvType) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  for (KvType type : {KvType::F32, KvType::F16, KvType::BF16, KvType::I8, KvType::FP8}) {
    for (auto [n_head, head_dim] : {std::pair<int64_t, int64_t>{6, 20}, {6, 64}, {6, 80}, {16, 128}}) {
      const AttentionShape shape{n_head, 2, head_dim, 1.0f / std::sqrt(float(head_dim))};
      const int64_t block_size = 16, n_blocks = 4, kv_row = shape.n_head_kv * head_dim;
      const auto k = random_floats(size_t(n_blocks * block_size * kv_row), 7);
      const auto v = random_floats(size_t(n_blocks * block_size * kv_row), 8);
      // Blocks out of order, as a block table would give them.
      const std::vector<int64_t> order{2, 0, 3, 1};
      const auto ek = encode_blocks(type, k, n_blocks, block_size, shape.n_head_kv, head_dim, order);
      const auto ev = encode_blocks(type, v, n_blocks, block_size, shape.n_head_kv, head_dim, order);
      const KvBlocksView view{type, ek.ptrs.data(), ev.ptrs.data(), block_size, ek.scales_offset};
      const auto fk = encode_blocks(KvType::F32, k, n_blocks, block_size, shape.n_head_kv, head_dim, order);
      const auto fv = encode_blocks(KvType::F32, v, n_blocks, block_size, shape.n_head_kv, head_dim, order);
      const KvBlocksView exact{KvType::F32, fk.ptrs.data(), fv.ptrs.data(), block_size, 0};
      const auto q = random_floats(size_t(shape.n_head * head_dim), 9, 2.0f);
      for (int64_t n_pos : {1, 5, 37, 64}) {
        std::vector<float> scratch(size_t(attend_scratch_floats(n_pos, shape))), out(q.size()), ref(q.size()), split(q.size()),
            full(q.size());
        attend(q.data(), view, n_pos, shape, 0, shape.n_head, scratch.data(), out.data(), GetParam());
        attend(q.data(), view, n_pos, shape, 0, shape.n_head, scratch.data(), ref.data(), Isa::Scalar);
        expect_close(out, ref, 1e-5, 1e-5, kv_type_name(type));
        // A head's result does not depend on which other heads the call covers.
        attend(q.data(), view, n_pos, shape, 0, 1, scratch.data(), split.data(), GetParam());
        attend(q.data(), view, n_pos, shape, 1, shape.n_head, scratch.data(), split.data(), GetParam());
        EXPECT_EQ(split, out);
        // Against fp32 K/V: the storage type's own rounding, bounded per type (values are O(1)); a score's
        // rounding error grows with √head_dim.
        attend(q.data(), exact, n_pos, shape, 0, shape.n_head, scratch.data(), full.data(), Isa::Scalar);
        const double per_type = type == KvType::F32   ? 1e-6
                                : type == KvType::F16 ? 3e-3
                                : type == KvType::I8  ? 3e-2
                                                      : 0.15;  // FP8: 3 mantissa bits
        const double bound = per_type * std::max(1.0, std::sqrt(double(head_dim) / 64.0));
        for (size_t i = 0; i < full.size(); ++i) ASSERT_NEAR(out[i], full[i], bound) << kv_type_name(type) << " " << i;
      }
    }
  }
}

// The heads one token's calls keep together fill a register pass: 16 lanes of 2 kv heads of 8 query heads
// (TinyLlama, Qwen3-32B), of 4 of 4 (Llama-3-8B); a kv head of up to 4 query heads packs 4 kv heads; a group
// of over 8 query heads is a unit alone. Every unit is whole kv heads' groups.
TEST(AttentionHeadsUnit, WholePassesOfWholeGroups) {
  EXPECT_EQ(attend_heads_unit({32, 4, 64, 0.125f}), 16);
  EXPECT_EQ(attend_heads_unit({64, 8, 128, 0.088f}), 16);
  EXPECT_EQ(attend_heads_unit({32, 8, 128, 0.088f}), 16);
  EXPECT_EQ(attend_heads_unit({32, 32, 64, 0.125f}), 4);
  EXPECT_EQ(attend_heads_unit({14, 2, 64, 0.125f}), 14);
  EXPECT_EQ(attend_heads_unit({18, 2, 64, 0.125f}), 9);
  EXPECT_EQ(attend_heads_unit({16, 1, 64, 0.125f}), 16);
}

TEST_P(KernelOps, AttentionOverTokenRunsEqualsOneCallPerToken) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  // head_dim 20 pads each fp32 row to 24: the row tiles must ignore the padding exactly as single rows do.
  // One token's call puts several kv heads in one register (AVX-512: 2 of up to 8 query heads each, 4 of up to 4;
  // AVX2: 1 and 2): the shapes give passes full and short of kv heads, and the head ranges cut them.
  struct Case {
    KvType type;
    int64_t head_dim, n_head, n_head_kv;
  };
  // Groups of 1 (4 / 4), 2 (16 / 8), 3 (12 / 4), 5 (10 / 2), 6 (12 / 2), 7 (14 / 2), 8 and 9 (16 / 2 packs, 18 / 2
  // does not); several full passes (16 / 8, 32 / 8); head_dim 64 and 128 (whose key strides the score tiles take
  // as constants), 128 at Qwen3-0.6B's 16 / 8 and 64 at Qwen2.5-0.5B's 14 / 2; 144, whose value sums take two
  // column passes.
  for (const Case& c : {Case{KvType::F32, 40, 8, 2}, Case{KvType::F16, 40, 8, 2}, Case{KvType::I8, 40, 8, 2},
                        Case{KvType::FP8, 40, 8, 2}, Case{KvType::F16, 20, 8, 2}, Case{KvType::F16, 64, 24, 3},
                        Case{KvType::I8, 40, 24, 3}, Case{KvType::F16, 40, 20, 5}, Case{KvType::BF16, 20, 6, 3},
                        Case{KvType::F16, 64, 4, 4}, Case{KvType::F16, 40, 14, 2}, Case{KvType::I8, 80, 16, 2},
                        Case{KvType::F16, 40, 18, 2}, Case{KvType::F16, 32, 16, 8}, Case{KvType::BF16, 64, 32, 8},
                        Case{KvType::F16, 128, 16, 4}, Case{KvType::F32, 144, 16, 2}, Case{KvType::F16, 128, 16, 8},
                        Case{KvType::F16, 64, 14, 2}, Case{KvType::F16, 40, 12, 4}, Case{KvType::F16, 40, 10, 2},
                        Case{KvType::I8, 40, 12, 2}}) {
    const KvType type = c.type;
    const int64_t head_dim = c.head_dim;
    const AttentionShape shape{c.n_head, c.n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim))};
    const int64_t block_size = 16, n_blocks = 8, kv_row = shape.n_head_kv * shape.head_dim;
    const auto k = random_floats(size_t(n_blocks * block_size * kv_row), 21);
    const auto v = random_floats(size_t(n_blocks * block_size * kv_row), 22);
    const std::vector<int64_t> order{1, 2, 0, 7, 3, 6, 4, 5};
    const auto ek = encode_blocks(type, k, n_blocks, block_size, shape.n_head_kv, shape.head_dim, order);
    const auto ev = encode_blocks(type, v, n_blocks, block_size, shape.n_head_kv, shape.head_dim, order);
    const KvBlocksView view{type, ek.ptrs.data(), ev.ptrs.data(), block_size, ek.scales_offset};
    const int64_t q_dim = shape.n_head * shape.head_dim, max_tokens = 11;
    const auto q = random_floats(size_t(max_tokens * q_dim), 23, 2.0f);
    // Runs that start inside a chunk of 8 positions and cross several; runs after chunks of 48 positions that
    // every token sees whole; single tokens at and around 48-position chunk edges; head ranges that cut kv-head
    // groups. Each call gets the scratch attend_scratch_floats asks for, full of NaN: a read of scratch the call
    // did not write, or past its size, shows in the results. A tail of NaN follows it, which must stay NaN: a
    // write past its size shows too.
    constexpr int64_t kTail = 64;
    const auto nan_scratch = [](int64_t floats) {
      return std::vector<float>(size_t(floats + kTail), std::numeric_limits<float>::quiet_NaN());
    };
    const auto tail_untouched = [](const std::vector<float>& scratch) {
      return std::all_of(scratch.end() - kTail, scratch.end(), [](float x) { return std::isnan(x); });
    };
    for (auto [n_pos, n_tokens] : {std::pair<int64_t, int64_t>{1, 1}, {1, 11}, {5, 8}, {13, 4}, {37, 11}, {44, 8},
                                   {48, 1}, {49, 1}, {95, 1}, {96, 8}, {101, 11}, {117, 3}}) {
      for (auto [h0, h1] : {std::pair<int64_t, int64_t>{0, shape.n_head}, {3, std::min<int64_t>(7, shape.n_head)},
                            {1, shape.n_head - 1}, {shape.n_head / 4 + 1, shape.n_head - shape.n_head / 4}}) {
        std::vector<float> run(size_t(n_tokens * q_dim), -1.0f), single(run.size(), -1.0f);
        std::vector<float> scratch = nan_scratch(attend_scratch_floats(n_pos + n_tokens - 1, shape, n_tokens));
        attend_tokens(q.data(), q_dim, n_tokens, view, n_pos, shape, h0, h1, scratch.data(), run.data(), q_dim,
                      GetParam());
        EXPECT_TRUE(tail_untouched(scratch)) << n_tokens << " tokens from " << n_pos;
        for (int64_t i = 0; i < n_tokens; ++i) {
          scratch = nan_scratch(attend_scratch_floats(n_pos + i, shape));
          attend(q.data() + i * q_dim, view, n_pos + i, shape, h0, h1, scratch.data(), single.data() + i * q_dim,
                 GetParam());
          EXPECT_TRUE(tail_untouched(scratch)) << "one token after " << n_pos + i;
        }
        EXPECT_EQ(run, single) << kv_type_name(type) << ", head_dim " << head_dim << ", " << shape.n_head << " / "
                               << shape.n_head_kv << " heads " << h0 << "-" << h1 << ", " << n_tokens
                               << " tokens from " << n_pos;
      }
    }
  }
}

TEST_P(KernelOps, AttentionDoesNotDependOnBlockSize) {
  TESSERA_SKIP_IF_UNSUPPORTED(GetParam());
  // The same rows in blocks of 16, 5, 3 and 1 positions (chunks of 8 positions cross block edges anywhere).
  const AttentionShape shape{8, 2, 40, 0.15f};
  const int64_t kv_row = shape.n_head_kv * shape.head_dim, q_dim = shape.n_head * shape.head_dim, n_pos = 37,
                n_tokens = 11, n_rows = n_pos + n_tokens - 1;
  const auto q = random_floats(size_t(n_tokens * q_dim), 31, 2.0f);
  for (KvType type : {KvType::F16, KvType::I8}) {
    std::vector<float> first;
    for (int64_t block_size : {16, 5, 3, 1}) {
      const int64_t n_blocks = (n_rows + block_size - 1) / block_size;
      // Rows past n_rows (the last block's tail) are never read; the first n_rows are the same for every size.
      auto k = random_floats(size_t(n_rows * kv_row), 32), v = random_floats(size_t(n_rows * kv_row), 33);
      k.resize(size_t(n_blocks * block_size * kv_row), 0.0f);
      v.resize(k.size(), 0.0f);
      std::vector<int64_t> identity;
      for (int64_t b = 0; b < n_blocks; ++b) identity.push_back(b);
      const auto ek = encode_blocks(type, k, n_blocks, block_size, shape.n_head_kv, shape.head_dim, identity);
      const auto ev = encode_blocks(type, v, n_blocks, block_size, shape.n_head_kv, shape.head_dim, identity);
      const KvBlocksView view{type, ek.ptrs.data(), ev.ptrs.data(), block_size, ek.scales_offset};
      std::vector<float> scratch(size_t(attend_scratch_floats(n_rows, shape, n_tokens))), out(size_t(n_tokens * q_dim));
      attend_tokens(q.data(), q_dim, n_tokens, view, n_pos, shape, 0, shape.n_head, scratch.data(), out.data(), q_dim,
                    GetParam());
      // One token at a time (the packed decode path, whose chunks then start inside blocks) gives the run's bits.
      std::vector<float> singles(out.size());
      for (int64_t t = 0; t < n_tokens; ++t) {
        attend(q.data() + t * q_dim, view, n_pos + t, shape, 0, shape.n_head, scratch.data(),
               singles.data() + t * q_dim, GetParam());
      }
      EXPECT_EQ(singles, out) << kv_type_name(type) << ", blocks of " << block_size;
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_EQ(out, first) << kv_type_name(type) << ", blocks of " << block_size;
      }
    }
  }
}

TEST(KvEncoding, RowsRoundTripWithinTheTypePrecision) {
  const int64_t n_head_kv = 3, head_dim = 24;
  const auto x = random_floats(size_t(n_head_kv * head_dim), 11, 3.0f);
  for (KvType type : {KvType::F32, KvType::F16, KvType::BF16, KvType::I8, KvType::FP8}) {
    std::vector<uint8_t> row(size_t(n_head_kv * head_dim * 4));
    std::vector<float> scales(static_cast<size_t>(n_head_kv)), back(x.size());
    encode_kv_row(type, x.data(), n_head_kv, head_dim, row.data(), scales.data());
    decode_kv_row(type, row.data(), scales.data(), n_head_kv, head_dim, back.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double amax = 3.0 * 4;  // generous bound on |x| for these draws
      const double rel = type == KvType::F32 ? 0 : type == KvType::F16 ? 1e-3 : type == KvType::BF16 ? 8e-3 : 0.07;
      const double abs_bound = type == KvType::I8 ? amax / 127.0 : rel * std::fabs(x[i]) + 1e-6;
      EXPECT_NEAR(back[i], x[i], abs_bound) << kv_type_name(type) << " " << i;
    }
  }
  EXPECT_EQ(kv_type_from_name("int8"), KvType::I8);
  EXPECT_FALSE(kv_type_from_name("int3").has_value());
}

INSTANTIATE_TEST_SUITE_P(KernelIsas, KernelOps, ::testing::ValuesIn(testing::kernel_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace tessera
