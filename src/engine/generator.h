// Single-sequence generation on its own small KV pool: the engine for `tessera run`, perplexity and golden
// tests. (The server uses the batching engine; both share Forward and Sampler.)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/request.h"
#include "engine/sampling_params.h"
#include "kv/kv_pool.h"
#include "model/forward.h"

namespace tessera {


struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids
  std::string text;             // generated text, stop string excluded
  FinishReason finish_reason = FinishReason::Length;
  int64_t n_prompt_tokens = 0;
  double prompt_seconds = 0.0;
  double generation_seconds = 0.0;  // from the first sampled token to the end
};

class Generator {
 public:
  // n_ctx: the longest sequence (prompt + generation) this generator holds; 0 means the model's training context.
  // kv_type: F32 by default here, the exact path the golden tests compare against the reference implementations.
  Generator(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_ctx = 0, int64_t prefill_chunk = 512,
            KvType kv_type = KvType::F32);

  int64_t n_ctx() const { return n_ctx_; }

  // The KV cache a generator of n_ctx positions allocates (for checking it against the memory available).
  static uint64_t kv_cache_bytes(const ModelConfig& config, int64_t n_ctx, KvType kv_type);
  // The longest context whose cache fits in `budget_bytes` (a multiple of 256 positions when at least 256, else
  // of the block size; 0 when not even one block fits).
  static int64_t context_that_fits(const ModelConfig& config, uint64_t budget_bytes, KvType kv_type);

  // Generates from `prompt` (token ids, BOS included if wanted). `on_text` receives valid UTF-8 as it is
  // produced; returning false cancels. Throws tessera::Error when the prompt does not fit the context.
  GenerationResult generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                            const std::function<bool(std::string_view)>& on_text = {});

  // Logits after every prompt position, [prompt.size(), n_vocab], computed in one pass.
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt);

 private:
  // Runs tokens [begin, end) of `tokens` at positions begin.. and returns the logits of the last one
  // (all of them when all_logits).
  std::span<const float> feed(const std::vector<int32_t>& tokens, size_t begin, size_t end, bool all_logits);
  void check_prompt(const std::vector<int32_t>& prompt) const;

  std::shared_ptr<const Model> model_;
  int64_t n_ctx_;
  int64_t prefill_chunk_;
  KvPool kv_;
  Forward forward_;
  ForwardBatch batch_;
  std::vector<int32_t> block_table_;
};

}  // namespace tessera
