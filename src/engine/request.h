// What flows through the batching engine: a request as submitted, the events it produces, and how it ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace tessera {
namespace grammar {
struct Constraint;
}

using Clock = std::chrono::steady_clock;

enum class FinishReason {
  Stop,       // EOS / end-of-turn token or a stop string
  Length,     // max_tokens reached, or the context is full
  Timeout,    // the deadline passed
  Cancelled,  // cancel() (e.g. the client disconnected) or engine shutdown
  Error,      // the request failed (see `error`); the engine goes on
};
const char* finish_reason_name(FinishReason reason);  // OpenAI spelling: "stop", "length", ...

// Why the engine refuses a request: the caller maps it (the server to an error code and the field to blame).
enum class RequestProblem {
  InvalidParameter,  // a sampling parameter, n or top_logprobs out of range
  EmptyPrompt,       // no tokens
  InvalidToken,      // a token id outside the vocabulary
  ContextLength,     // the prompt (with max_tokens, when it must fit) is longer than the context
  CacheTooSmall,     // the whole KV cache holds fewer positions than the request needs
};

// Thrown at the engine's door (check_request) for a request that can never run; nothing was queued.
class InvalidRequest : public Error {
 public:
  // `field`: the request field at fault where the problem alone does not say (e.g. "logit_bias"), else empty.
  InvalidRequest(RequestProblem problem, const std::string& message, std::string field = {})
      : Error(message), problem_(problem), field_(std::move(field)) {}
  RequestProblem problem() const { return problem_; }
  const std::string& field() const { return field_; }

 private:
  RequestProblem problem_;
  std::string field_;
};

// Throws InvalidRequest (EmptyPrompt, InvalidToken) when the prompt is empty or holds a token id outside
// [0, n_vocab).
void check_prompt_tokens(std::span<const int32_t> prompt, int64_t n_vocab);

struct Request {
  std::vector<int32_t> prompt;  // token ids, BOS included when wanted
  SamplingParams sampling;
  int32_t priority = 0;         // lower value is served first; FCFS within a class
  std::optional<Clock::time_point> deadline;
  int32_t top_logprobs = 0;     // how many alternatives to report per token (0..20)
  bool logprobs = false;        // report the sampled token's log-probability
  bool capture_logits = false;  // attach the raw logits row to each token event (tests, debugging)
  bool report_start = false;    // send a Started event when the request is first scheduled (leaves the queue)
  // Send the logits after every prompt position (PromptLogits events, in position order): perplexity and
  // reference comparisons. The prompt is then computed whole (no prefix-cache reuse); with max_tokens 0 the
  // request ends with Length once the prompt is computed, and the prompt may fill the whole context.
  bool prompt_logits = false;
  // >= 0: PromptLogprobs events instead of whole rows: for each prompt token after the first, its log-probability
  // and this many most likely alternatives (0..20; OpenAI's echo with logprobs, vLLM's prompt_logprobs). The
  // prompt is computed whole, as with prompt_logits, and max_tokens may be 0.
  int32_t prompt_logprobs = -1;
  bool wants_prompt_rows() const { return prompt_logits || prompt_logprobs >= 0; }
  // Prefix-cache namespace: cached KV blocks are shared only between requests with the same value, because the
  // hash chain of a prompt's blocks starts from it (0: the common namespace). The server derives it from the
  // tenant and `cache_salt`, so that what one tenant's prompts cached is invisible to another's.
  uint64_t cache_namespace = 0;
  // Samples of the same prompt. The prompt is computed once; then the sequence forks into n sequences that
  // share its KV blocks (copy-on-write). Sample i uses seed + i. Each sample ends with its own Finished event.
  int32_t n = 1;
  // The API's rule: prompt + max_tokens must fit the context, else the request is refused (ContextLength).
  // Without it a sample that fills the context ends there with Length.
  bool must_fit_context = false;
  // Constrained decoding (engine/constraint.h): only tokens the grammar allows are sampled, end-of-generation
  // only where it may end, and the request finishes (Stop) once nothing may follow. Null: unconstrained.
  std::shared_ptr<const grammar::Constraint> constraint;
  // Speculative decoding for this request when the engine has it on (the API's "speculative": false turns it
  // off). The output does not depend on it: greedy tokens are the same, sampled ones the same distribution.
  bool speculative = true;
};

// What an engine takes requests within (Engine::limits()).
struct RequestLimits {
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;       // the usable context: the model's, or less when configured
  int64_t block_size = 1;  // KV positions per block
  int64_t n_blocks = 0;    // blocks in the whole cache
};

// The one validation of a request, at the engine's door (Engine::submit), also callable before submitting
// (the server's request preparation): throws InvalidRequest when `request` can never run within `limits`.
void check_request(const Request& request, const RequestLimits& limits);

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

struct RequestStats {
  int64_t n_prompt_tokens = 0;
  int64_t n_cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache (not computed)
  int64_t n_generated_tokens = 0;
  int32_t n_preemptions = 0;
  double queue_seconds = 0.0;          // submit → first scheduled
  double time_to_first_token_seconds = 0.0;
  double e2e_seconds = 0.0;
};

// Delivered on the engine's thread, in order; the callback must be quick (hand off, don't block).
struct StreamEvent {
  // Started: only with Request::report_start, once, when the request leaves the waiting queue (its first step).
  // PromptLogits: only with Request::prompt_logits; `logits` holds [n, n_vocab] for the next n prompt positions.
  // PromptLogprobs: only with Request::prompt_logprobs >= 0; `prompt_logprobs` holds the next prompt tokens' (the
  // first prompt token has none: nothing precedes it).
  enum class Kind { Token, Finished, Started, PromptLogits, PromptLogprobs };
  Kind kind = Kind::Token;
  uint64_t request_id = 0;
  int32_t index = 0;  // which of the request's n samples
  // Kind::Token: the sampled token and the text it completes (valid UTF-8, stop strings held back/excluded;
  // may be empty while a multi-byte character or a possible stop string is pending).
  int32_t token = -1;
  std::string text;
  TokenLogprob sampled;
  std::vector<TokenLogprob> top_logprobs;
  std::vector<float> logits;  // only with Request::capture_logits, or a PromptLogits event
  std::vector<PositionLogprobs> prompt_logprobs;  // a PromptLogprobs event
  // Kind::Finished: also carries trailing text that was held back.
  FinishReason finish_reason = FinishReason::Stop;
  std::string error;
  RequestStats stats;
};

using EventCallback = std::function<void(const StreamEvent&)>;

}  // namespace tessera
