// Request preparation: parse, check, render, tokenize.
#include "server/request_prep.h"

#include <algorithm>
#include <charconv>

#include "server/errors.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

std::optional<int64_t> header_int(const HttpRequest& req, std::string_view name, int64_t lo, int64_t hi) {
  const std::string_view v = req.header(name);
  if (v.empty()) return std::nullopt;
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    throw ApiException(ErrorCode::InvalidRequest,
                       "header " + std::string(name) + " must be an integer between " + std::to_string(lo) +
                           " and " + std::to_string(hi));
  return x;
}

}  // namespace

RequestPreparer::RequestPreparer(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                                 const SpecialTokenEncoder& encoder, StructuredOutput& structured, PrepOptions options)
    : tokenizer_(tokenizer),
      chat_template_(chat_template),
      encoder_(encoder),
      structured_(structured),
      options_(std::move(options)) {
  // A piece is never shorter than the text it stands for: "<0x41>" for one byte, "▁the" for " the", a byte-level
  // BPE piece in its two-bytes-per-byte alphabet. An unknown character (up to 4 bytes) may become one token.
  longest_piece_ = 4;
  for (const std::string& t : tokenizer.vocab().tokens) longest_piece_ = std::max(longest_piece_, t.size());
}

Request engine_request(const ApiRequest& api, const std::vector<int32_t>& prompt) {
  Request r;
  r.prompt = prompt;
  r.sampling = api.sampling;
  r.priority = api.priority.value_or(0);
  r.logprobs = api.logprobs;
  r.top_logprobs = api.top_logprobs;
  // Echo's logprobs and vLLM's prompt_logprobs share the engine's: as many alternatives as either asks for.
  if (api.echo && api.logprobs) r.prompt_logprobs = api.top_logprobs;
  r.prompt_logprobs = std::max(r.prompt_logprobs, api.prompt_logprobs);
  r.cache_namespace = api.cache_namespace;
  r.n = api.n;  // one prompt, n samples forked from it (sample i draws with seed + i)
  r.must_fit_context = true;  // the API refuses what cannot complete its max_tokens
  r.constraint = api.constraint;
  r.speculative = api.speculative;
  return r;
}

void RequestPreparer::check_text_fits(size_t bytes, const char* param) const {
  const uint64_t most = uint64_t(options_.limits.n_ctx) * longest_piece_;
  if (bytes > most)
    throw ApiException(ErrorCode::ContextLengthExceeded,
                       "this model's maximum context length is " + std::to_string(options_.limits.n_ctx) +
                           " tokens; the prompt's " + std::to_string(bytes) + " bytes are more than that many " +
                           "tokens can hold (at most " + std::to_string(longest_piece_) + " bytes each)",
                       param);
}

std::vector<std::vector<int32_t>> RequestPreparer::prompt_tokens(const ApiRequest& r) const {
  if (r.endpoint == Endpoint::ChatCompletions) {
    const std::string text = chat_template_.render(r.messages, r.chat_template_kwargs, r.structured.template_tools());
    check_text_fits(text.size(), "messages");
    return {encoder_.encode(text, true)};
  }
  if (r.prompt_is_tokens) return r.prompt_ids;  // their range is the engine's check
  for (const std::string& text : r.prompts) check_text_fits(text.size(), "prompt");
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : r.prompts) prompts.push_back(tokenizer_.encode(text, true));
  return prompts;
}

void RequestPreparer::check_model(const std::string& model) const {
  if (!model.empty() && model != options_.model_name)
    throw ApiException(ErrorCode::ModelNotFound, "the model '" + model + "' does not exist", "model");
}

PreparedRequest RequestPreparer::prepare(Endpoint endpoint, const HttpRequest& http, const ApiKey* key) const {
  const nlohmann::json body = parse_body(http.body);
  PreparedRequest p;
  ApiRequest& req = p.request;
  req = endpoint == Endpoint::Completions
            ? parse_completion_request(body, options_.parse_limits, options_.base_sampling)
            : parse_chat_request(body, options_.parse_limits, options_.base_sampling);
  req.structured = parse_structured_request(http.body, body, endpoint == Endpoint::ChatCompletions);
  if (!req.priority) req.priority = header_int(http, "X-Priority", -1000000, 1000000);
  if (key && !req.priority) req.priority = key->default_priority();
  if (key && *req.priority < key->priority_min)
    throw ApiException(ErrorCode::PermissionDenied,
                       "priority " + std::to_string(*req.priority) + " is more urgent than this API key may ask for (" +
                           std::to_string(key->priority_min) + " at the most urgent)",
                       "priority");
  if (!req.timeout_ms) req.timeout_ms = header_int(http, "X-Timeout-Ms", 1, 24LL * 3600 * 1000);
  if (!req.timeout_ms && options_.default_timeout_ms > 0) req.timeout_ms = options_.default_timeout_ms;
  check_model(req.model);

  p.prompts = prompt_tokens(req);
  size_t longest = 0;
  for (const std::vector<int32_t>& prompt : p.prompts) longest = std::max(longest, prompt.size());
  const int64_t room = options_.limits.n_ctx - int64_t(longest);
  if (!req.max_tokens_given) {
    const int64_t wanted = endpoint == Endpoint::Completions ? 16 : room;
    req.sampling.max_tokens = int32_t(std::max<int64_t>(1, std::min(wanted, room)));
  }
  // The engine's own check, before the gateway spends anything on the request (tokens, cache, queue).
  for (size_t i = 0; i < p.prompts.size(); ++i) {
    try {
      check_request(engine_request(req, p.prompts[i]), options_.limits);
    } catch (const InvalidRequest& e) {
      ApiError error = api_error(e, endpoint == Endpoint::Completions ? "prompt" : "messages", req.max_tokens_given);
      if (p.prompts.size() > 1) error.message = "prompt " + std::to_string(i) + " of the batch: " + error.message;
      throw ApiException(error);
    }
  }
  req.constraint = structured_.constraint(req.structured);  // 400 for a schema, regex or grammar refused
  check_response_size(req, p.prompts);
  return p;
}

void RequestPreparer::check_response_size(const ApiRequest& req, const std::vector<std::vector<int32_t>>& prompts) const {
  uint64_t worst = 0, tokens = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    worst += worst_case_response_bytes(req, longest_piece_, int64_t(prompt.size()));
    tokens += uint64_t(req.n) * uint64_t(response_tokens(req, int64_t(prompt.size())));
  }
  const std::string what = "(" + std::to_string(tokens) + " tokens: " +
                           (prompts.size() > 1 ? std::to_string(prompts.size()) + " prompts x " : std::string()) +
                           "n = " + std::to_string(req.n) + " x (max_tokens = " +
                           std::to_string(req.sampling.max_tokens) + (req.echo ? " + the echoed prompt" : "") +
                           "), up to " + std::to_string(worst / std::max<uint64_t>(1, tokens)) +
                           " bytes each with top_logprobs = " + std::to_string(req.top_logprobs) +
                           (req.prompt_logprobs >= 0
                                ? ", and each prompt token's prompt_logprobs = " + std::to_string(req.prompt_logprobs)
                                : std::string()) +
                           ")";
  // A complete response is built in memory and sent at once: refuse one that could pass the limit, naming it,
  // rather than drop it half written.
  if (!req.stream && worst > options_.max_response_bytes)
    throw ApiException(ErrorCode::InvalidRequest,
                       "the response could reach " + std::to_string(worst) + " bytes " + what +
                           ", more than this server's limit of " + std::to_string(options_.max_response_bytes) +
                           " bytes for a complete response; ask for fewer tokens, choices or logprobs, or stream",
                       req.prompt_logprobs > 0 ? "prompt_logprobs" : "max_tokens");
  // A stream is sent as it comes, except an echo: each choice's prompt (with its logprobs) goes out in one write,
  // and a stream whose unsent bytes pass the server's buffer is dropped.
  if (req.stream && req.echo && req.logprobs) {
    ApiRequest echo_only = req;
    echo_only.sampling.max_tokens = 0;
    uint64_t echo_bytes = 0;
    for (const std::vector<int32_t>& prompt : prompts)
      echo_bytes += worst_case_response_bytes(echo_only, longest_piece_, int64_t(prompt.size()));
    if (echo_bytes > options_.max_stream_echo_bytes)
      throw ApiException(ErrorCode::InvalidRequest,
                         "the streamed echo of the prompts with their logprobs could reach " +
                             std::to_string(echo_bytes) + " bytes at once, more than a stream may buffer (" +
                             std::to_string(options_.max_stream_echo_bytes) +
                             "); ask without stream, or for fewer choices or top_logprobs",
                         "echo");
  }
}

}  // namespace tessera::server
