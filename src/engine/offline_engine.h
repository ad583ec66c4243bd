// The synchronous front end of the engine, for offline users (`tessera run`, perplexity, golden tests): one
// request at a time on an Engine of its own, sized for one sequence, waited for in the caller's thread. It has
// no generation loop of its own: tokens come out of the same step and output processor that serve requests.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "engine/sampling_params.h"

namespace tessera {

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids
  std::string text;             // generated text, stop string excluded
  FinishReason finish_reason = FinishReason::Length;
  int64_t n_prompt_tokens = 0;
  double prompt_seconds = 0.0;      // from the request to its first sampled token
  double generation_seconds = 0.0;  // from the first sampled token to the end
};

class OfflineEngine {
 public:
  // n_ctx: the longest sequence (prompt + generation) it holds; 0 means the model's training context.
  // prefill_chunk: prompt tokens per forward pass. kv_type: F32 by default here, the exact path the golden tests
  // compare against the reference implementations. Runs its forward passes on `pool`, which must outlive it.
  // `speculative`: the engine's speculative decoding (off by default; the tokens do not depend on it).
  OfflineEngine(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_ctx = 0, int64_t prefill_chunk = 512,
                KvType kv_type = KvType::F32, SpeculativeOptions speculative = {});

  int64_t n_ctx() const { return n_ctx_; }
  EngineStats stats() const { return engine_.stats(); }

  // Generates from `prompt` (token ids, BOS included if wanted). `on_text` receives valid UTF-8 as it is
  // produced, on the engine's thread; returning false cancels. Throws InvalidRequest when the prompt does not
  // fit the context or a parameter is invalid (the engine's check). A prompt that fills the context ends at
  // once with Length.
  GenerationResult generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                            const std::function<bool(std::string_view)>& on_text = {});

  // Logits after every prompt position, [prompt.size(), n_vocab], computed prefill_chunk positions at a time.
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt);

 private:
  // The engine options of an offline engine: one sequence of n_ctx positions, its whole cache, no prefix reuse
  // (each call starts from nothing, as a fresh process would).
  static EngineOptions options_for(const Model& model, int64_t n_ctx, int64_t prefill_chunk, KvType kv_type,
                                   SpeculativeOptions speculative);

  std::shared_ptr<const Model> model_;
  int64_t n_ctx_;
  Engine engine_;
};

}  // namespace tessera
