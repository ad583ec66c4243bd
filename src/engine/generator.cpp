// The single-sequence loop: chunked prefill, then sample → decode → forward until a stop condition.
#include "engine/generator.h"

#include <chrono>

#include "core/error.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

constexpr int64_t kBlockSize = 16;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

uint64_t Generator::kv_cache_bytes(const ModelConfig& c, int64_t n_ctx, KvType kv_type) {
  return uint64_t((n_ctx + kBlockSize - 1) / kBlockSize) *
         KvPool::block_bytes(c.n_layer, c.n_head_kv, c.head_dim, kBlockSize, kv_type);
}

int64_t Generator::context_that_fits(const ModelConfig& c, uint64_t budget_bytes, KvType kv_type) {
  const int64_t positions =
      int64_t(budget_bytes / KvPool::block_bytes(c.n_layer, c.n_head_kv, c.head_dim, kBlockSize, kv_type)) * kBlockSize;
  return positions >= 256 ? positions / 256 * 256 : positions;
}

Generator::Generator(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_ctx, int64_t prefill_chunk,
                     KvType kv_type)
    : model_(model),
      n_ctx_(usable_context(model->config(), n_ctx)),
      prefill_chunk_(prefill_chunk),
      kv_(model->config().n_layer, model->config().n_head_kv, model->config().head_dim,
          (n_ctx_ + kBlockSize - 1) / kBlockSize, kBlockSize, kv_type),
      forward_(model, kv_, pool) {
  // One sequence owns the whole pool.
  for (int32_t b = 0; b < int32_t(kv_.n_blocks()); ++b) block_table_.push_back(b);
}

void Generator::check_prompt(const std::vector<int32_t>& prompt) const {
  if (int64_t(prompt.size()) > n_ctx_) {
    fail("the prompt has {} tokens but the context holds only {}", prompt.size(), n_ctx_);
  }
  check_prompt_tokens(prompt, model_->config().n_vocab);
}

std::span<const float> Generator::feed(const std::vector<int32_t>& tokens, size_t begin, size_t end, bool all_logits) {
  batch_.clear();
  const int32_t seq = batch_.add_sequence(block_table_);
  for (size_t i = begin; i < end; ++i) {
    batch_.add_token(tokens[i], int32_t(i), seq, all_logits || i + 1 == end);
  }
  return forward_.run(batch_);
}

std::vector<float> Generator::prompt_logits(const std::vector<int32_t>& prompt) {
  check_prompt(prompt);
  std::vector<float> all;
  all.reserve(prompt.size() * size_t(model_->config().n_vocab));
  for (size_t begin = 0; begin < prompt.size(); begin += size_t(prefill_chunk_)) {
    const size_t end = std::min(prompt.size(), begin + size_t(prefill_chunk_));
    const auto logits = feed(prompt, begin, end, true);
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

GenerationResult Generator::generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                     const std::function<bool(std::string_view)>& on_text) {
  check_prompt(prompt);
  if (const std::string problem = validate(params); !problem.empty()) fail("invalid sampling parameters: {}", problem);

  GenerationResult result;
  result.n_prompt_tokens = int64_t(prompt.size());
  const Tokenizer& tokenizer = model_->tokenizer();
  const int64_t n_vocab = model_->config().n_vocab;
  Sampler sampler(params);
  StopMatcher stops(params.stop);
  // The first generated token follows a BOS-only prompt without a separating space to drop, so the decoder's
  // leading-space rule applies only when the prompt is just BOS.
  IncrementalDecoder decoder(tokenizer, prompt.size() == 1 && prompt[0] == tokenizer.vocab().bos);
  std::vector<int32_t> history = prompt;

  auto emit = [&](const std::string& text) -> bool {
    if (text.empty()) return true;
    result.text += text;
    return !on_text || on_text(text);
  };

  const auto prompt_start = std::chrono::steady_clock::now();
  std::span<const float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += size_t(prefill_chunk_)) {
    logits = feed(prompt, begin, std::min(prompt.size(), begin + size_t(prefill_chunk_)), false);
  }
  result.prompt_seconds = seconds_since(prompt_start);

  const auto gen_start = std::chrono::steady_clock::now();
  result.finish_reason = FinishReason::Length;
  for (int32_t i = 0; i < params.max_tokens; ++i) {
    if (int64_t(history.size()) >= n_ctx_) break;  // context full: ends as "length"
    const int32_t id = sampler.sample(logits.first(size_t(n_vocab)), history).id;
    if (!params.ignore_eos && tokenizer.is_eog(id)) {
      result.finish_reason = FinishReason::Stop;
      break;
    }
    result.tokens.push_back(id);
    history.push_back(id);
    if (!emit(stops.push(decoder.push(id)))) {
      result.finish_reason = FinishReason::Cancelled;
      break;
    }
    if (stops.stopped()) {
      result.finish_reason = FinishReason::Stop;
      break;
    }
    if (i + 1 < params.max_tokens && int64_t(history.size()) < n_ctx_) {
      logits = feed(history, history.size() - 1, history.size(), false);
    }
  }
  if (result.finish_reason == FinishReason::Length || (result.finish_reason == FinishReason::Stop && !stops.stopped())) {
    emit(stops.push(decoder.flush()));
    emit(stops.flush());
  }
  result.generation_seconds = seconds_since(gen_start);
  return result;
}

}  // namespace tessera
