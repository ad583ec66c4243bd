// Sampled token → text, logprobs, finish reason, events.
#include "engine/output_processor.h"

#include <algorithm>

namespace tessera {

StreamEvent finished_event(uint64_t request_id, int32_t index, FinishReason reason, std::string error,
                           const RequestStats& stats) {
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::Finished;
  ev.request_id = request_id;
  ev.index = index;
  ev.finish_reason = reason;
  ev.error = std::move(error);
  ev.stats = stats;
  return ev;
}

OutputProcessor::OutputProcessor(const Tokenizer& tokenizer, const Request& request)
    : tokenizer_(tokenizer),
      request_(request),
      // Text after a BOS-only prompt starts the document: the tokenizer's leading space is dropped there only
      // (a continued prompt keeps the space that separates it from the generated text; so does a constrained
      // output, whose grammar saw that space).
      decoder_(tokenizer,
               request.prompt.size() == 1 && request.prompt[0] == tokenizer.vocab().bos && !request.constraint),
      stops_(request.sampling.stop) {}

TokenOutcome OutputProcessor::accept(int32_t id, Sampler& sampler, std::span<const float> logits,
                                     int64_t n_tokens_after, int64_t max_len, StreamEvent& event) {
  const SamplingParams& sp = request_.sampling;
  if (!sp.ignore_eos && tokenizer_.is_eog(id)) return {false, FinishReason::Stop};
  if (std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) != sp.stop_token_ids.end())
    return {false, FinishReason::Stop};
  ++n_generated_;
  event.token = id;
  event.text = stops_.push(decoder_.push(id), n_generated_ >= sp.min_tokens);
  if (request_.logprobs || request_.top_logprobs > 0) {
    event.sampled = {id, sampler.logprob(id)};
    for (const auto& [alt, lp] : sampler.top_logprobs(size_t(request_.top_logprobs)))
      event.top_logprobs.push_back({alt, lp});
  }
  if (request_.capture_logits) event.logits.assign(logits.begin(), logits.end());
  TokenOutcome out;
  if (stops_.stopped()) {
    out.finish = FinishReason::Stop;
  } else if (n_generated_ >= sp.max_tokens || n_tokens_after >= max_len) {
    out.finish = FinishReason::Length;
  }
  return out;
}

void OutputProcessor::finish(FinishReason reason, StreamEvent& event) {
  if (reason == FinishReason::Length || (reason == FinishReason::Stop && !stops_.stopped())) {
    event.text = stops_.push(decoder_.flush());
    event.text += stops_.flush();
  }
}

}  // namespace tessera
