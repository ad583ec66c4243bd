// The OpenAI wire format: request bodies of /v1/completions and /v1/chat/completions parsed and validated into
// an ApiRequest (SamplingParams for the engine), and the response objects and stream chunks built back.
// Parsing throws ApiException (400 with the offending `param`); nothing here touches the engine.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace tessera::server {

enum class Endpoint { Completions, ChatCompletions };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" ("developer" is read as "system")
  std::string content;
  nlohmann::ordered_json tool_calls = nullptr;  // assistant: the calls it made (OpenAI's array), null when none
  std::string tool_call_id = {};       // tool: the call this is the result of
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                   // empty: the served model
  // Completions: one prompt or several (OpenAI's prompt arrays), as text or as token ids; each prompt gets n
  // choices, choice i of prompt p at index p·n + i. Chat: none (the messages are the prompt).
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> prompt_ids;
  bool prompt_is_tokens = false;  // prompt_ids holds the prompts
  std::vector<ChatMessage> messages;   // chat
  nlohmann::json chat_template_kwargs = nlohmann::json::object();  // chat: extra template variables (vLLM's)
  SamplingParams sampling;             // the server's base (the model's defaults), overridden by the body
  bool max_tokens_given = false;       // false: the route picks the default (16 / rest of the context)
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool echo = false;                   // completions: the reply starts with the prompt (and its logprobs)
  int32_t prompt_logprobs = -1;        // vLLM's: each prompt token's logprob, rank and this many alternatives
  bool logprobs = false;               // report the sampled token's log-probability
  int32_t top_logprobs = 0;            // alternatives per token
  std::optional<int32_t> priority;     // extension: lower is served first
  std::optional<int64_t> timeout_ms;   // extension: deadline from arrival
  std::string cache_salt;              // vLLM's: separates this request's caches from other requests' (empty: none)
  uint64_t cache_namespace = 0;        // set by the server: the prefix-cache namespace of the tenant and salt
  std::string user;
  StructuredRequest structured;  // response_format, regex, grammar, tools (parse_structured_request)
  std::shared_ptr<const grammar::Constraint> constraint;  // compiled from `structured` by the service
  bool speculative = true;             // extension: false opts out of the server's speculative decoding

  bool deterministic() const { return sampling.is_greedy() || sampling.has_seed; }
};

struct ParseLimits {
  static constexpr size_t kMaxCacheSaltBytes = 1024;
  int32_t max_n = 16;
  int32_t max_prompts = 64;  // prompts in one completions request
  int32_t max_stop = 16;
  int32_t max_top_logprobs = 20;
  int64_t max_tokens = 1 << 20;  // absolute cap; the context check comes later with the prompt length
};

// Arrays and objects nested deeper than this in a body (or in a tool call's arguments string) are refused with a
// 400: parsing is iterative, but copying, dumping and rendering a JSON value recurse once per level, and a 1 MB
// body could nest half a million levels, past any thread's stack. No schema or conversation needs more.
inline constexpr size_t kMaxJsonNesting = 256;
// And objects of more members are a 400: the body is parsed again as ordered_json where key order matters
// (schemas, tools, tool-call arguments), whose inserts search the keys linearly, so a 1 MiB object of 105,000 keys
// held a parse worker for 20 s; at 512, 1 MiB of such objects parses in ~0.14 s. A schema object has at most 512
// properties (grammar::JsonSchemaLimits).
inline constexpr size_t kMaxJsonObjectMembers = 512;

// Parses a body into JSON: malformed JSON, invalid UTF-8, nesting deeper than kMaxJsonNesting and objects of
// more than kMaxJsonObjectMembers are ErrorCode::InvalidJson.
nlohmann::json parse_body(std::string_view body);
// `base` is what the request starts from before its own fields (the model's recommended sampling settings,
// formats/sampling_defaults.h; neutral by default).
ApiRequest parse_completion_request(const nlohmann::json& body, const ParseLimits& limits = {},
                                    const SamplingParams& base = {});
ApiRequest parse_chat_request(const nlohmann::json& body, const ParseLimits& limits = {},
                              const SamplingParams& base = {});

// Serializes for the wire; invalid UTF-8 (a token piece that is half a character) becomes U+FFFD.
std::string dump_json(const nlohmann::json& j);

// ---- Responses ----

struct TokenAlternative {
  std::string piece;
  float logprob = 0.0f;
};

struct TokenInfo {
  std::string piece;  // raw bytes of the token (may be part of a UTF-8 character)
  float logprob = 0.0f;
  std::vector<TokenAlternative> top;
  bool no_context = false;  // an echoed prompt's first token: nothing precedes it, its logprob and top are null
  // Bytes of the choice's text the token stands for, when not piece.size(): an echoed prompt's first word, whose
  // piece has the space the tokenizer put in front of the text (text_offset counts in the text).
  int64_t text_bytes = -1;
  int64_t bytes_in_text() const { return text_bytes >= 0 ? text_bytes : int64_t(piece.size()); }
};

struct ChoiceResult {
  std::string text;  // the reply as generated
  std::vector<TokenInfo> tokens;  // filled only when logprobs were asked for
  FinishReason finish_reason = FinishReason::Stop;
  int64_t n_generated = 0;
  // Chat with tools: the reply split into content and tool calls (tool_calls.h); response_json sends these.
  bool has_tool_calls_parsed = false;
  std::string content = {};
  std::vector<ToolCall> tool_calls = {};
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

// What every object of one response shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
};

nlohmann::json usage_json(const Usage& usage);
// The non-streaming body. `logprobs`: include the logprobs objects (else null).
nlohmann::json response_json(const ResponseHeader& h, const std::vector<ChoiceResult>& choices, const Usage& usage,
                             bool logprobs);
// One stream chunk for choice `index`: text delta, optional logprobs for the tokens it covers (text_offset of
// the first one given), optional finish reason; `role` adds {"role": "assistant"} to a chat delta;
// `usage_null` adds "usage": null as OpenAI does on every chunk once include_usage is set.
nlohmann::json chunk_json(const ResponseHeader& h, int32_t index, std::string_view text, bool role,
                          const std::vector<TokenInfo>* logprobs, int64_t text_offset,
                          std::optional<FinishReason> finish, bool usage_null);
// The final usage chunk: empty choices and the totals.
nlohmann::json usage_chunk_json(const ResponseHeader& h, const Usage& usage);

// The tokens each choice of a response to `req` may hold: max_tokens, and with echo the prompt's.
int64_t response_tokens(const ApiRequest& req, int64_t n_prompt_tokens);
// An upper bound of the bytes of a non-streaming response to `req` (the streaming ones are sent as they come):
// n choices of response_tokens tokens of at most `longest_piece` bytes each, every byte escaped for JSON (at most
// 6 bytes), and with logprobs the token and its top_logprobs alternatives with their byte arrays.
uint64_t worst_case_response_bytes(const ApiRequest& req, size_t longest_piece, int64_t n_prompt_tokens);

// "stop", "length", "timeout", "cancelled" ("error" is never sent as a finish reason).
const char* finish_reason_string(FinishReason reason);
// The choice's finish reason on the wire: "tool_calls" when it stopped after calling tools.
const char* finish_reason_string(FinishReason reason, bool called_tools);

}  // namespace tessera::server
