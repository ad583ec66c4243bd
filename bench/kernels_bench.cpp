// Kernel micro-benchmarks: matmul weight bandwidth at batch 1 and FLOP rate for batches, against a plain
// memory-read baseline, and a prompt's attention. Run: kernels_bench --benchmark_filter=Matmul (TESSERA_ISA picks
// the level).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kv/kv_pool.h"

namespace tessera {
namespace {

constexpr int64_t kNIn = 2048, kNOut = 5632;  // a TinyLlama-1.1B FFN projection

// TESSERA_BENCH_THREADS overrides the default of one thread per physical core.
ThreadPool& pool() {
  static ThreadPool p(std::getenv("TESSERA_BENCH_THREADS") ? std::atoi(std::getenv("TESSERA_BENCH_THREADS")) : 0);
  return p;
}

// Several copies of one matrix, used in turn, so that each call reads its weights from memory rather than from
// the 32 MiB L3 that a single 2048×5632 matrix would fit in (a real model's layers do not).
struct BenchWeights {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::vector<WeightMatrix> views;
  size_t matrix_bytes = 0;
};

const BenchWeights& weights(TensorType type) {
  static std::unique_ptr<BenchWeights> cache[32];
  auto& slot = cache[static_cast<int>(type)];
  if (!slot) {
    slot = std::make_unique<BenchWeights>();
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> row(kNIn);
    const size_t row_bytes = tensor_row_bytes(type, kNIn);
    slot->data.resize(row_bytes * kNOut);
    slot->scales.resize(kNOut);
    for (int64_t r = 0; r < kNOut; ++r) {
      for (auto& v : row) v = dist(rng);
      quantize_row(type, row.data(), slot->data.data() + r * row_bytes, kNIn, &slot->scales[r]);
    }
    slot->matrix_bytes = slot->data.size();
    const size_t copies = std::max<size_t>(2, (size_t{128} << 20) / slot->matrix_bytes + 1);
    slot->data.resize(slot->matrix_bytes * copies);
    for (size_t c = 1; c < copies; ++c)
      std::memcpy(slot->data.data() + c * slot->matrix_bytes, slot->data.data(), slot->matrix_bytes);
    for (size_t c = 0; c < copies; ++c)
      slot->views.push_back(WeightMatrix{type, kNOut, kNIn, slot->data.data() + c * slot->matrix_bytes, row_bytes,
                                         type == TensorType::I8 ? slot->scales.data() : nullptr});
  }
  return *slot;
}

void BM_Matmul(benchmark::State& state, TensorType type) {
  const int64_t n_tokens = state.range(0);
  const BenchWeights& w = weights(type);
  std::vector<float> x(size_t(n_tokens * kNIn), 0.5f), y(size_t(n_tokens * kNOut));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 255) - 127) / 64.0f;
  size_t next = 0;
  for (auto _ : state) {
    matmul(w.views[next], x.data(), n_tokens, y.data(), pool());
    next = (next + 1) % w.views.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.matrix_bytes));
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * kNIn * kNOut * n_tokens * double(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
  state.counters["tok/s"] = benchmark::Counter(double(n_tokens * state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa_name(active_isa())) + ", " + std::to_string(pool().size()) + " threads");
}

// The bandwidth a decode matmul is measured against: every thread sums its share of a buffer larger than L3.
void BM_MemoryRead(benchmark::State& state) {
  const size_t n = size_t{256} << 20;
  static std::vector<uint64_t> buffer(n / 8, 1);
  for (auto _ : state) {
    std::vector<uint64_t> sums(size_t(pool().size()) * 8);
    pool().parallel_for(int64_t(buffer.size()), [&](int64_t begin, int64_t end) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = begin; i + 4 <= end; i += 4) {
        s0 += buffer[i];
        s1 += buffer[i + 1];
        s2 += buffer[i + 2];
        s3 += buffer[i + 3];
      }
      sums[size_t(begin * pool().size() / int64_t(buffer.size())) * 8] = s0 + s1 + s2 + s3;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}

void BM_ThreadPoolRegion(benchmark::State& state) {
  std::atomic<int> counter{0};
  for (auto _ : state) pool().run([&](int, int) { counter.fetch_add(1, std::memory_order_relaxed); });
  benchmark::DoNotOptimize(counter.load());
}

void BM_RmsNorm(benchmark::State& state) {
  std::vector<float> x(4096, 0.5f), wt(4096, 1.0f), out(4096);
  for (auto _ : state) {
    rms_norm(x.data(), wt.data(), 1e-5f, 4096, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_Softmax(benchmark::State& state) {
  std::vector<float> x(4096);
  for (auto _ : state) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) * 0.1f;
    softmax(x.data(), int64_t(x.size()));
    benchmark::DoNotOptimize(x.data());
  }
}

// SwiGLU over one token's FFN activations at TinyLlama's width (5632).
void BM_Swiglu(benchmark::State& state) {
  std::vector<float> gate(5632), up(gate.size()), out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = float(int(i % 29) - 14) * 0.25f, up[i] = float(i % 7) * 0.5f;
  for (auto _ : state) {
    swiglu(gate.data(), up.data(), int64_t(gate.size()), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["values/s"] = benchmark::Counter(double(gate.size()) * double(state.iterations()),
                                                  benchmark::Counter::kIsRate);
}

// Rope on one token's query heads at TinyLlama's shape (32 heads of 64), with the position's cos/sin computed
// beforehand, as the forward pass calls it per layer. Arg: 0 interleaved pairs (Llama GGUF), 1 NeoX halves (Qwen).
void BM_Rope(benchmark::State& state) {
  const RopeLayout layout = state.range(0) == 0 ? RopeLayout::Interleaved : RopeLayout::NeoX;
  constexpr int64_t kHeads = 32, kHeadDim = 64;
  std::vector<float> x(kHeads * kHeadDim), inv_freq(kHeadDim / 2), cos(inv_freq.size()), sin(inv_freq.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) * 0.1f;
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / kHeadDim);
  rope_cos_sin(100, inv_freq.data(), int64_t(inv_freq.size()), cos.data(), sin.data());
  for (auto _ : state) {
    rope_precomputed(x.data(), kHeads, kHeadDim, cos.data(), sin.data(), layout);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["values/s"] = benchmark::Counter(double(x.size()) * double(state.iterations()),
                                                  benchmark::Counter::kIsRate);
}

// Attention for one layer on one thread, as the forward pass calls it, over TinyLlama's heads (32 query, 4 kv,
// head_dim 64, 22 layers) and an f16 KvPool in 16-position blocks: a whole prompt in runs of 8 tokens, or one decode
// step at the last position. Counter: GFLOP/s (QK and PV, 2 flops per multiply-add, causal).
// Arg 0: positions; arg 1: tokens per call (8: a prompt's runs; 1: decode steps, the last position only).
void BM_Attention(benchmark::State& state) {
  const int64_t n_prompt = state.range(0), run = state.range(1), block = 16, n_layer = 22, layer = 11;
  const AttentionShape shape{32, 4, 64, 0.125f};
  const int64_t kv_row = shape.n_head_kv * shape.head_dim, q_dim = shape.n_head * shape.head_dim;
  const int64_t n_blocks = (n_prompt + block - 1) / block;
  // A pool like the engine's: one layer's K (or V) of a block is one region, 22 layers of them apart.
  KvPool pool(n_layer, shape.n_head_kv, shape.head_dim, n_blocks, block, KvType::F16);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> k(static_cast<size_t>(kv_row)), v(k.size());
  for (int64_t p = 0; p < n_prompt; ++p) {
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    pool.store(int32_t(p / block), layer, p % block, k.data(), v.data());
  }
  std::vector<const uint8_t*> key_blocks, value_blocks;
  for (int32_t b = 0; b < n_blocks; ++b) {
    key_blocks.push_back(pool.keys(b, layer));
    value_blocks.push_back(pool.values(b, layer));
  }
  const KvBlocksView view{KvType::F16, key_blocks.data(), value_blocks.data(), block, pool.scales_offset()};
  std::vector<float> q(size_t(n_prompt * q_dim)), out(q.size());
  for (auto& x : q) x = dist(rng);
  std::vector<float> scratch(size_t(attend_scratch_floats(n_prompt, shape, run)));
  const bool decode = run == 1;
  for (auto _ : state) {
    for (int64_t t = decode ? n_prompt - 1 : 0; t < n_prompt; t += run) {
      attend_tokens(q.data() + t * q_dim, q_dim, std::min(run, n_prompt - t), view, t + 1, shape, 0, shape.n_head,
                    scratch.data(), out.data() + t * q_dim, q_dim);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = decode ? 4.0 * double(shape.head_dim * shape.n_head) * double(n_prompt)
                              : 4.0 * double(shape.head_dim * shape.n_head) * double(n_prompt) * double(n_prompt + 1) / 2;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

// Decode attention as a model meets it: each of the 22 layers' K/V is read once per token, after a layer's
// weights (24 MiB here, about TinyLlama's at Q4_0) have streamed through every cache level, so the rows come
// from memory. Time of one layer's call (all 32 heads, one thread), eviction reads excluded.
// Arg 0: positions attended; arg 1: the KV type (KvType's order: 0 f32, 1 f16, 2 bf16, 3 int8, 4 fp8); arg 2:
// the heads, 0 TinyLlama's (32 query heads, 4 kv heads of 64) or 1 Llama-3-8B's (32, 8 of 128).
void BM_AttentionDecodeCold(benchmark::State& state) {
  const int64_t n_pos = state.range(0), block = 16, n_layer = 22;
  const KvType type = kKvTypes[state.range(1)];
  const bool llama3 = state.range(2) == 1;
  state.SetLabel(std::string(kv_type_name(type)) + (llama3 ? ", 32/8 heads of 128" : ", 32/4 heads of 64"));
  const AttentionShape shape = llama3 ? AttentionShape{32, 8, 128, 0.0884f} : AttentionShape{32, 4, 64, 0.125f};
  const int64_t kv_row = shape.n_head_kv * shape.head_dim, q_dim = shape.n_head * shape.head_dim;
  const int64_t n_blocks = (n_pos + block - 1) / block;
  KvPool pool(n_layer, shape.n_head_kv, shape.head_dim, n_blocks, block, type);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> k(static_cast<size_t>(kv_row)), v(k.size());
  for (int64_t layer = 0; layer < n_layer; ++layer) {
    for (int64_t p = 0; p < n_pos; ++p) {
      for (auto& x : k) x = dist(rng);
      for (auto& x : v) x = dist(rng);
      pool.store(int32_t(p / block), layer, p % block, k.data(), v.data());
    }
  }
  std::vector<std::vector<const uint8_t*>> key_blocks(static_cast<size_t>(n_layer)), value_blocks(key_blocks);
  for (int64_t layer = 0; layer < n_layer; ++layer) {
    for (int32_t b = 0; b < n_blocks; ++b) {
      key_blocks[size_t(layer)].push_back(pool.keys(b, layer));
      value_blocks[size_t(layer)].push_back(pool.values(b, layer));
    }
  }
  std::vector<float> q(static_cast<size_t>(q_dim)), out(q.size());
  for (auto& x : q) x = dist(rng);
  std::vector<float> scratch(static_cast<size_t>(attend_scratch_floats(n_pos, shape)));
  constexpr size_t kEvictBytes = size_t{24} << 20;
  std::vector<uint8_t> evict(kEvictBytes * 4, 1);
  size_t evict_at = 0;
  int64_t layer = 0;
  uint64_t sink = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < kEvictBytes; i += 64) sink += evict[evict_at + i];
    evict_at = (evict_at + kEvictBytes) % evict.size();
    state.ResumeTiming();
    const KvBlocksView view{type, key_blocks[size_t(layer)].data(), value_blocks[size_t(layer)].data(), block,
                            pool.scales_offset()};
    attend_tokens(q.data(), q_dim, 1, view, n_pos, shape, 0, shape.n_head, scratch.data(), out.data(), q_dim);
    benchmark::DoNotOptimize(out.data());
    layer = (layer + 1) % n_layer;
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = benchmark::Counter(double(2 * n_pos * kv_row * kv_element_bytes(type)) * double(state.iterations()),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

BENCHMARK(BM_MemoryRead)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadPoolRegion)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, Q8_0, TensorType::Q8_0)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, Q4_0, TensorType::Q4_0)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, Q4_K, TensorType::Q4_K)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, Q6_K, TensorType::Q6_K)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, I8, TensorType::I8)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, F16, TensorType::F16)->Arg(1)->Arg(16)->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, BF16, TensorType::BF16)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, F32, TensorType::F32)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionDecodeCold)
    ->Args({256, 1, 0})
    ->Args({2048, 1, 0})
    ->Args({2048, 0, 0})
    ->Args({2048, 2, 0})
    ->Args({2048, 3, 0})
    ->Args({2048, 4, 0})
    ->Args({256, 1, 1})
    ->Args({2048, 1, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RmsNorm);
BENCHMARK(BM_Softmax);
BENCHMARK(BM_Rope)->Arg(0)->Arg(1);
BENCHMARK(BM_Swiglu);
BENCHMARK(BM_Attention)->Args({512, 8})->Args({2048, 8})->Args({256, 1})->Args({2048, 1})->Args({8192, 1})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
