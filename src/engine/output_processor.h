// The per-token tail of one sample, the one copy of it: end-of-generation check → streaming detokenizer → stop
// strings → length, then the flush of held-back text when it ends; the logprobs a token reports; and the
// events a request receives (Token, Finished), built here and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

// A Finished event: the single place one is made (with the trailing text added by OutputProcessor::finish).
StreamEvent finished_event(uint64_t request_id, int32_t index, FinishReason reason, std::string error,
                           const RequestStats& stats);

// What one sampled token did to its sample.
struct TokenOutcome {
  bool keep = true;                    // false: an end-of-generation token, which is not part of the output
  std::optional<FinishReason> finish;  // the sample ends with this token
};

class OutputProcessor {
 public:
  // Keeps references to `tokenizer` and `request`, which must outlive it.
  OutputProcessor(const Tokenizer& tokenizer, const Request& request);

  // Takes one sampled token. When it is kept, fills `event` (a Token event whose request id and index are set)
  // with its text, its logprobs from `sampler` (the distribution it was drawn from) and, when asked, the raw
  // `logits`. n_tokens_after: the sequence's length with the token; max_len: the most it may hold.
  TokenOutcome accept(int32_t id, Sampler& sampler, std::span<const float> logits, int64_t n_tokens_after,
                      int64_t max_len, StreamEvent& event);
  // Adds to a Finished event the text still held back, when the sample ends for `reason`: a stop string found
  // drops what it held; any other end releases it.
  void finish(FinishReason reason, StreamEvent& event);

  int64_t n_generated() const { return n_generated_; }

 private:
  const Tokenizer& tokenizer_;
  const Request& request_;
  IncrementalDecoder decoder_;
  StopMatcher stops_;
  int64_t n_generated_ = 0;
};

}  // namespace tessera
