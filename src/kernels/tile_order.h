// The order in which a prompt's activations wait for the panel tiles (matmul_panel_inl.h, fp32 values;
// matmul_bf16_avx512.cpp, bf16 pairs): token blocks of `block` tokens; in each block its chunks of k (`chunk`
// values, or the whole row where it is at most a quarter longer); in each chunk its tiles of `tile` tokens (the
// block's last tile may be shorter); in each tile value by value, the tile's tokens side by side. A tile's chunk
// is then one run of memory that it reads in order, broadcasting one value per token and k.
//
// The activations' preparation writes this order once per call, split over the threads by tokens, for every
// thread and every matrix that shares the input: one more copy of the activations, the size of x. Packing them
// per thread instead (each thread copying every token for every matrix it multiplies, its loads waiting on memory)
// took 4.0 % of a BF16 prefill's samples with bf16 products (beside the tiles' 91 %) and 2.2 % of an F16 bench
// run's (beside 83 %), and more on the thread that had the small k and v projections.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::kernels {
// An anonymous namespace, as the kernels' other shared headers: each ISA file compiles its own copy.
namespace {

struct TileOrder {
  int64_t n_tokens = 0;
  int64_t n_values = 0;  // per token: n_in, or its pairs
  int64_t chunk_values = 0;
  int64_t block_tokens = 0;
  int64_t tile_tokens = 0;

  int64_t chunk() const { return n_values <= chunk_values + chunk_values / 4 ? n_values : chunk_values; }
  // Tokens of the block from tb.
  int64_t block(int64_t tb) const { return std::min(block_tokens, n_tokens - tb); }
  // The first value of the tile of tokens from t (a multiple of tile_tokens into its block) in the chunk from k0.
  int64_t tile_at(int64_t t, int64_t k0) const {
    const int64_t tb = t / block_tokens * block_tokens;
    return tb * n_values + block(tb) * k0 + (t - tb) * std::min(chunk(), n_values - k0);
  }
  // The first token of the tile that holds token t, and that tile's token count.
  int64_t tile_of(int64_t t) const {
    const int64_t tb = t / block_tokens * block_tokens;
    return t - (t - tb) % tile_tokens;
  }
  int64_t tokens_of_tile(int64_t tt) const {
    const int64_t tb = tt / block_tokens * block_tokens;
    return std::min(tile_tokens, block(tb) - (tt - tb));
  }

  // For tokens [t_begin, t_end): whole(tt, nt) for each tile (from token tt, nt tokens) the range holds whole, and
  // part(t) for each token of a tile it splits (a thread's range may start or end mid-tile).
  template <typename Whole, typename Part>
  void for_each_tile_in(int64_t t_begin, int64_t t_end, Whole&& whole, Part&& part) const {
    for (int64_t t = t_begin; t < t_end;) {
      const int64_t tt = tile_of(t), nt = tokens_of_tile(tt);
      if (tt == t && t + nt <= t_end) {
        whole(tt, nt);
        t += nt;
      } else {
        part(t++);
      }
    }
  }

  // f(k0, k_end, at, stride) for each chunk [k0, k_end) of token t: its value k goes to at + (k − k0)·stride
  // (stride: the token count of t's tile).
  template <typename F>
  void for_each_chunk(int64_t t, F&& f) const {
    const int64_t tt = tile_of(t), stride = tokens_of_tile(tt), step = chunk();
    for (int64_t k0 = 0; k0 < n_values; k0 += step) {
      f(k0, std::min(n_values, k0 + step), tile_at(tt, k0) + (t - tt), stride);
    }
  }
};

}  // namespace
}  // namespace tessera::kernels
