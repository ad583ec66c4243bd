// Names of request outcomes as the OpenAI API spells them.
#include "engine/request.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Timeout: return "timeout";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

void check_prompt_tokens(std::span<const int32_t> prompt, int64_t n_vocab) {
  if (prompt.empty()) throw InvalidRequest(RequestProblem::EmptyPrompt, "the prompt is empty (no tokens)");
  for (int32_t id : prompt) {
    if (id < 0 || id >= n_vocab)
      throw InvalidRequest(RequestProblem::InvalidToken,
                           fmt::format("token id {} is out of range (the vocabulary is 0..{})", id, n_vocab - 1));
  }
}

void check_request(const Request& request, const RequestLimits& limits) {
  auto refuse = [](RequestProblem problem, std::string message) { throw InvalidRequest(problem, message); };
  // Before validate(), to name the field: max_tokens may be the server's default, not the client's.
  if (const std::string problem = min_tokens_problem(request.sampling); !problem.empty())
    throw InvalidRequest(RequestProblem::InvalidParameter, problem, "min_tokens");
  if (const std::string problem = validate(request.sampling); !problem.empty())
    refuse(RequestProblem::InvalidParameter, problem);
  if (request.top_logprobs < 0 || request.top_logprobs > 20)
    refuse(RequestProblem::InvalidParameter, "top_logprobs must be in 0..20");
  if (request.n < 1 || request.n > 128) refuse(RequestProblem::InvalidParameter, "n must be in 1..128");
  if (request.prompt_logprobs < -1 || request.prompt_logprobs > 20)
    refuse(RequestProblem::InvalidParameter, "prompt_logprobs must be in 0..20 (or -1: none)");
  check_prompt_tokens(request.prompt, limits.n_vocab);
  auto check_token = [&](int32_t id, const char* field) {
    if (id >= limits.n_vocab)
      throw InvalidRequest(RequestProblem::InvalidParameter,
                           fmt::format("{}: token id {} is out of range (the vocabulary is 0..{})", field, id,
                                       limits.n_vocab - 1),
                           field);
  };
  for (const LogitBias& b : request.sampling.logit_bias) check_token(b.token, "logit_bias");
  for (int32_t id : request.sampling.stop_token_ids) check_token(id, "stop_token_ids");
  const auto n_prompt = int64_t(request.prompt.size());
  const int64_t max_tokens = request.sampling.max_tokens;
  if (request.must_fit_context && n_prompt + max_tokens > limits.n_ctx) {
    refuse(RequestProblem::ContextLength,
           fmt::format("this model's maximum context length is {} tokens; the request has {} prompt tokens and {} "
                       "tokens to generate",
                       limits.n_ctx, n_prompt, max_tokens));
  }
  // Only the prompt's logits: the prompt may fill the context, as nothing is generated after it.
  const bool prompt_only = request.wants_prompt_rows() && max_tokens == 0;
  if (n_prompt > limits.n_ctx || (n_prompt == limits.n_ctx && !prompt_only)) {
    refuse(RequestProblem::ContextLength,
           fmt::format("the prompt has {} tokens but the context holds only {} (prompt and at least one generated "
                       "token)",
                       n_prompt, limits.n_ctx));
  }
  const int64_t max_len = std::min<int64_t>(n_prompt + max_tokens, limits.n_ctx);
  const int64_t blocks = (max_len + limits.block_size - 1) / limits.block_size;
  if (blocks > limits.n_blocks) {
    refuse(RequestProblem::CacheTooSmall, fmt::format("the request needs {} KV blocks ({} tokens) but the whole "
                                                      "cache has {}",
                                                      blocks, max_len, limits.n_blocks));
  }
}

}  // namespace tessera
