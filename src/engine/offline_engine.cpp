// Submit one request, wait for its Finished event.
#include "engine/offline_engine.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>

#include "core/error.h"
#include "engine/kv_sizing.h"

namespace tessera {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A request's end, waited for by the submitting thread.
class Completion {
 public:
  void done() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

EngineOptions OfflineEngine::options_for(const Model& model, int64_t n_ctx, int64_t prefill_chunk, KvType kv_type,
                                         SpeculativeOptions speculative) {
  EngineOptions o;
  o.speculative = std::move(speculative);
  o.n_ctx = usable_context(model.config(), n_ctx);
  o.kv_type = kv_type;
  o.kv_blocks = kv_blocks_for_context(o.n_ctx, o.kv_block_size);
  o.scheduling.max_seqs = 1;
  o.scheduling.max_batched_tokens = prefill_chunk;
  o.prefix_caching = false;
  return o;
}

OfflineEngine::OfflineEngine(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_ctx, int64_t prefill_chunk,
                             KvType kv_type, SpeculativeOptions speculative)
    : model_(model),
      n_ctx_(usable_context(model->config(), n_ctx)),
      engine_(model, options_for(*model, n_ctx, prefill_chunk, kv_type, std::move(speculative)), pool) {}

GenerationResult OfflineEngine::generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                         const std::function<bool(std::string_view)>& on_text) {
  GenerationResult result;
  result.n_prompt_tokens = int64_t(prompt.size());
  result.finish_reason = FinishReason::Length;
  if (int64_t(prompt.size()) == n_ctx_) {  // no room for a token: the context is full already
    check_prompt_tokens(prompt, model_->config().n_vocab);
    if (const std::string problem = validate(params); !problem.empty())
      fail("invalid sampling parameters: {}", problem);
    return result;
  }

  Request request;
  request.prompt = prompt;
  request.sampling = params;
  // Without a seed the sampler starts from seed 0, as it always did offline: the same call, the same text.
  request.sampling.has_seed = true;
  Completion completion;
  Clock::time_point first_token{}, end{};
  bool cancelled = false;
  std::string error;
  const auto start = Clock::now();
  // Events arrive on the engine's thread, in order; `result` is read here only after the Finished one.
  const auto on_event = [&](const StreamEvent& ev) {
    if (ev.kind == StreamEvent::Kind::Token) {
      if (cancelled) return;
      if (result.tokens.empty()) first_token = Clock::now();
      result.tokens.push_back(ev.token);
      if (!ev.text.empty()) {
        result.text += ev.text;
        if (on_text && !on_text(ev.text)) {
          cancelled = true;
          engine_.cancel(ev.request_id);
        }
      }
    } else if (ev.kind == StreamEvent::Kind::Finished) {
      if (!cancelled) {
        result.finish_reason = ev.finish_reason;
        if (!ev.text.empty()) {
          result.text += ev.text;
          if (on_text) on_text(ev.text);
        }
      }
      if (ev.finish_reason == FinishReason::Error) error = ev.error;
      end = Clock::now();
      completion.done();
    }
  };
  try {
    engine_.submit(std::move(request), on_event);
  } catch (const InvalidRequest& e) {
    if (e.problem() != RequestProblem::InvalidParameter) throw;
    throw InvalidRequest(e.problem(), fmt::format("invalid sampling parameters: {}", e.what()), e.field());
  }
  completion.wait();
  if (!error.empty()) fail("generation failed: {}", error);
  if (cancelled) result.finish_reason = FinishReason::Cancelled;
  if (result.tokens.empty()) first_token = end;
  result.prompt_seconds = seconds_between(start, first_token);
  result.generation_seconds = seconds_between(first_token, end);
  return result;
}

std::vector<float> OfflineEngine::prompt_logits(const std::vector<int32_t>& prompt) {
  Request request;
  request.prompt = prompt;
  request.sampling.max_tokens = 0;
  request.prompt_logits = true;
  std::vector<float> all;
  all.reserve(prompt.size() * size_t(model_->config().n_vocab));
  Completion completion;
  std::string error;
  engine_.submit(std::move(request), [&](const StreamEvent& ev) {
    if (ev.kind == StreamEvent::Kind::PromptLogits) {
      all.insert(all.end(), ev.logits.begin(), ev.logits.end());
    } else if (ev.kind == StreamEvent::Kind::Finished) {
      if (ev.finish_reason != FinishReason::Length)
        error = ev.error.empty() ? finish_reason_name(ev.finish_reason) : ev.error;
      completion.done();
    }
  });
  completion.wait();
  if (!error.empty()) fail("computing the prompt's logits failed: {}", error);
  return all;
}

}  // namespace tessera
