// Request parsing/validation and response building for the OpenAI wire format.
#include "server/openai_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "core/json_shape.h"
#include "server/body_fields.h"
#include "server/errors.h"

namespace tessera::server {
namespace {

using nlohmann::json;

using body_fields::bad;
using body_fields::field;
using body_fields::read_bool;

std::string fmt_num(double x) {
  std::string s = std::to_string(x);  // "2.000000" -> "2"
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

double read_number(const json& v, const char* name, double lo, double hi) {
  if (!v.is_number()) bad(name, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) bad(name, "must be between " + fmt_num(lo) + " and " + fmt_num(hi));
  return x;
}

// Integers may arrive as 10 or 10.0; 10.5 is an error.
int64_t read_int(const json& v, const char* name, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      x = std::numeric_limits<int64_t>::max();
    } else {
      x = v.get<int64_t>();
    }
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) bad(name, "must be an integer");
    x = d >= 9.2e18 ? std::numeric_limits<int64_t>::max() : d <= -9.2e18 ? std::numeric_limits<int64_t>::min()
                                                                          : int64_t(d);
  } else {
    bad(name, "must be an integer");
  }
  if (x < lo || x > hi) bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

std::string read_string(const json& v, const char* name) {
  if (!v.is_string()) bad(name, "must be a string");
  return v.get<std::string>();
}

std::vector<std::string> read_stop(const json& v, int32_t max_stop) {
  std::vector<std::string> stop;
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (int64_t(v.size()) > max_stop) bad("stop", "may hold at most " + std::to_string(max_stop) + " strings");
    for (const json& s : v) {
      if (!s.is_string()) bad("stop", "must be a string or an array of strings");
      stop.push_back(s.get<std::string>());
    }
  } else {
    bad("stop", "must be a string or an array of strings");
  }
  for (const std::string& s : stop) {
    if (s.empty()) bad("stop", "must not contain empty strings");
    if (s.size() > kMaxStopBytes) bad("stop", "strings may be at most " + std::to_string(kMaxStopBytes) + " bytes long");
  }
  return stop;
}

// OpenAI's {"token id": bias}: ids as canonical decimal strings (so two keys never name one token), biases in
// [-100, 100]. Sorted by token for the sampler.
std::vector<LogitBias> read_logit_bias(const json& v) {
  if (!v.is_object()) bad("logit_bias", "must be an object mapping token ids to biases");
  if (v.size() > kMaxLogitBiases)
    bad("logit_bias", "may hold at most " + std::to_string(kMaxLogitBiases) + " tokens");
  std::vector<LogitBias> biases;
  for (const auto& [key, value] : v.items()) {
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || key[0] < '0' || key[0] > '9' || (key.size() > 1 && key[0] == '0') || ec != std::errc() ||
        end != key.data() + key.size())
      bad("logit_bias", "keys must be token ids (non-negative integers without leading zeros), got '" +
                            key.substr(0, 32) + "'");
    biases.push_back({id, float(read_number(value, "logit_bias", -kMaxLogitBias, kMaxLogitBias))});
  }
  std::sort(biases.begin(), biases.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  return biases;
}

std::vector<int32_t> read_stop_token_ids(const json& v) {
  if (!v.is_array()) bad("stop_token_ids", "must be an array of token ids");
  if (v.size() > kMaxStopTokenIds)
    bad("stop_token_ids", "may hold at most " + std::to_string(kMaxStopTokenIds) + " tokens");
  std::vector<int32_t> ids;
  for (const json& t : v) ids.push_back(int32_t(read_int(t, "stop_token_ids", 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// Fields both endpoints share.
void parse_common(const json& body, const ParseLimits& limits, ApiRequest& r) {
  if (!body.is_object()) throw ApiException(ErrorCode::InvalidRequest, "the request body must be a JSON object");
  if (const json* v = field(body, "model")) r.model = read_string(*v, "model");
  SamplingParams& s = r.sampling;
  if (const json* v = field(body, "temperature")) s.temperature = float(read_number(*v, "temperature", 0.0, 2.0));
  if (const json* v = field(body, "top_p")) {
    s.top_p = float(read_number(*v, "top_p", 0.0, 1.0));
    if (s.top_p <= 0.0f) bad("top_p", "must be greater than 0");
  }
  if (const json* v = field(body, "top_k")) {
    const int64_t k = read_int(*v, "top_k", -1, 1 << 20);
    s.top_k = k < 0 ? 0 : int32_t(k);
  }
  if (const json* v = field(body, "min_p")) s.min_p = float(read_number(*v, "min_p", 0.0, 1.0));
  if (const json* v = field(body, "presence_penalty"))
    s.presence_penalty = float(read_number(*v, "presence_penalty", -2.0, 2.0));
  if (const json* v = field(body, "frequency_penalty"))
    s.frequency_penalty = float(read_number(*v, "frequency_penalty", -2.0, 2.0));
  if (const json* v = field(body, "repetition_penalty"))
    s.repetition_penalty = float(read_number(*v, "repetition_penalty", 0.01, 10.0));
  if (const json* v = field(body, "seed")) {
    s.seed = uint64_t(read_int(*v, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
    s.has_seed = true;
  }
  if (const json* v = field(body, "stop")) s.stop = read_stop(*v, limits.max_stop);
  if (const json* v = field(body, "ignore_eos")) s.ignore_eos = read_bool(*v, "ignore_eos");
  if (const json* v = field(body, "logit_bias")) s.logit_bias = read_logit_bias(*v);
  if (const json* v = field(body, "stop_token_ids")) s.stop_token_ids = read_stop_token_ids(*v);
  if (const json* v = field(body, "min_tokens")) s.min_tokens = int32_t(read_int(*v, "min_tokens", 0, limits.max_tokens));
  // Read first: with echo, max_tokens may be 0 (the prompt's logprobs only: how evaluation harnesses score text).
  if (r.endpoint == Endpoint::Completions)
    if (const json* v = field(body, "echo")) r.echo = read_bool(*v, "echo");
  const char* max_name = "max_tokens";
  const json* max_tokens = field(body, "max_tokens");
  if (r.endpoint == Endpoint::ChatCompletions && !max_tokens) {
    max_tokens = field(body, "max_completion_tokens");
    max_name = "max_completion_tokens";
  }
  if (max_tokens) {
    s.max_tokens = int32_t(read_int(*max_tokens, max_name, r.echo ? 0 : 1, limits.max_tokens));
    r.max_tokens_given = true;
  }
  if (const json* v = field(body, "n")) r.n = int32_t(read_int(*v, "n", 1, limits.max_n));
  if (const json* v = field(body, "stream")) r.stream = read_bool(*v, "stream");
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) bad("stream_options", "must be an object");
    if (!r.stream) bad("stream_options", "is only allowed when 'stream' is true");
    if (const json* u = field(*v, "include_usage")) r.include_usage = read_bool(*u, "stream_options.include_usage");
  }
  if (const json* v = field(body, "prompt_logprobs")) {
    r.prompt_logprobs = int32_t(read_int(*v, "prompt_logprobs", 0, limits.max_top_logprobs));
    if (r.stream) bad("prompt_logprobs", "is not supported with stream");
  }
  if (const json* v = field(body, "priority"))
    r.priority = int32_t(read_int(*v, "priority", -1000000, 1000000));
  if (const json* v = field(body, "timeout_ms")) r.timeout_ms = read_int(*v, "timeout_ms", 1, 24LL * 3600 * 1000);
  if (const json* v = field(body, "user")) r.user = read_string(*v, "user");
  // Extension: false keeps this request out of speculative decoding (the server's flags turn it on).
  if (const json* v = field(body, "speculative")) r.speculative = read_bool(*v, "speculative");
  if (const json* v = field(body, "cache_salt")) {
    r.cache_salt = read_string(*v, "cache_salt");
    if (r.cache_salt.size() > ParseLimits::kMaxCacheSaltBytes)
      bad("cache_salt", "may be at most " + std::to_string(ParseLimits::kMaxCacheSaltBytes) + " bytes long");
  }
  // What the fields mean together (and the sampling parameters' ranges once more, whatever the base) is checked
  // once, by the engine's check_request, when the prompt is known (request_prep.cpp).
}

std::string message_content(const json& m) {
  const json* c = field(m, "content");
  if (!c) return {};
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) bad("messages", "content must be a string or an array of content parts");
  std::string text;
  for (const json& part : *c) {
    if (!part.is_object()) bad("messages", "content parts must be objects");
    const json* type = field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      bad("messages", "only content parts of type 'text' are supported");
    const json* t = field(part, "text");
    if (!t || !t->is_string()) bad("messages", "a text content part needs a string 'text'");
    text += t->get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]. Arguments
// sent as a JSON string (OpenAI's form) reach the chat template as the object they spell, as transformers wants
// (Llama's template writes them with tojson; Qwen's writes a string as it is and an object with tojson).
nlohmann::ordered_json read_tool_calls(const json& v) {
  if (!v.is_array()) bad("messages", "'tool_calls' must be an array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const json& c : v) {
    const json* f = c.is_object() ? field(c, "function") : nullptr;
    const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
    if (!name || !name->is_string()) bad("messages", "each tool call needs a 'function' with a string 'name'");
    nlohmann::ordered_json call(c);
    if (const json* args = field(*f, "arguments"); args && args->is_string()) {
      // Key order kept: the template may write the object back out.
      const std::string& text = args->get_ref<const std::string&>();
      // Checked before the ordered parse, which the widest object makes quadratic.
      const JsonShape shape = json_shape(text);
      if (shape.widest_object > kMaxJsonObjectMembers)
        bad("messages", "tool call arguments have an object of more than " + std::to_string(kMaxJsonObjectMembers) +
                            " members");
      auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
      if (!parsed.is_discarded() && shape.depth > kMaxJsonNesting)
        bad("messages", "tool call arguments nest arrays and objects deeper than " + std::to_string(kMaxJsonNesting) +
                            " levels");
      if (!parsed.is_discarded()) call["function"]["arguments"] = std::move(parsed);
    }
    out.push_back(std::move(call));
  }
  return out;
}

json logprobs_completions(const std::vector<TokenInfo>& tokens, int64_t text_offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenInfo& t : tokens) {
    toks.push_back(t.piece);
    lps.push_back(t.logprob);
    if (t.no_context) {
      lps.back() = nullptr;
      tops.push_back(nullptr);
    } else {
      json top = json::object();
      for (const TokenAlternative& a : t.top) top[a.piece] = a.logprob;
      tops.push_back(std::move(top));
    }
    offsets.push_back(text_offset);
    text_offset += t.bytes_in_text();
  }
  return {{"tokens", std::move(toks)}, {"token_logprobs", std::move(lps)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

json bytes_of(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(int(c));
  return b;
}

json logprobs_chat(const std::vector<TokenInfo>& tokens) {
  json content = json::array();
  for (const TokenInfo& t : tokens) {
    json top = json::array();
    for (const TokenAlternative& a : t.top)
      top.push_back({{"token", a.piece}, {"logprob", a.logprob}, {"bytes", bytes_of(a.piece)}});
    content.push_back(
        {{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_of(t.piece)}, {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

json parse_body(std::string_view body) {
  json parsed;
  try {
    parsed = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e999
    throw ApiException(ErrorCode::InvalidJson, std::string("could not parse the JSON body: ") + e.what());
  }
  const JsonShape shape = json_shape(body);
  if (shape.depth > kMaxJsonNesting)
    throw ApiException(ErrorCode::InvalidJson, "the JSON body nests arrays and objects deeper than " +
                                                   std::to_string(kMaxJsonNesting) + " levels");
  if (shape.widest_object > kMaxJsonObjectMembers)
    throw ApiException(ErrorCode::InvalidJson, "the JSON body has an object of more than " +
                                                   std::to_string(kMaxJsonObjectMembers) + " members");
  return parsed;
}

ApiRequest parse_completion_request(const json& body, const ParseLimits& limits, const SamplingParams& base) {
  ApiRequest r;
  r.endpoint = Endpoint::Completions;
  r.sampling = base;
  parse_common(body, limits, r);
  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "is required");
  // A string, an array of token ids, or an array of either (a batch: strings or token arrays, not both).
  auto read_ids = [](const json& ids) {
    std::vector<int32_t> out;
    for (const json& t : ids) out.push_back(int32_t(read_int(t, "prompt", 0, 1 << 30)));
    return out;
  };
  const char* forms = "must be a string, an array of token ids, or an array of strings or of token-id arrays";
  if (prompt->is_string()) {
    r.prompts.push_back(prompt->get<std::string>());
  } else if (!prompt->is_array() || prompt->empty()) {
    bad("prompt", forms);
  } else if ((*prompt)[0].is_number()) {
    r.prompt_is_tokens = true;
    r.prompt_ids.push_back(read_ids(*prompt));
  } else {
    if (int64_t(prompt->size()) > limits.max_prompts)
      bad("prompt", "holds more than " + std::to_string(limits.max_prompts) + " prompts");
    r.prompt_is_tokens = (*prompt)[0].is_array();
    for (const json& one : *prompt) {
      if (r.prompt_is_tokens && one.is_array() && !one.empty()) {
        r.prompt_ids.push_back(read_ids(one));
      } else if (!r.prompt_is_tokens && one.is_string()) {
        r.prompts.push_back(one.get<std::string>());
      } else {
        bad("prompt", std::string(forms) + " (a batch holds prompts of one form, none empty)");
      }
    }
  }
  if (const json* v = field(body, "logprobs")) {
    r.top_logprobs = int32_t(read_int(*v, "logprobs", 0, limits.max_top_logprobs));
    r.logprobs = true;
  }
  if (const json* v = field(body, "best_of"); v && read_int(*v, "best_of", 1, limits.max_n) != r.n)
    bad("best_of", "is not supported");
  if (const json* v = field(body, "suffix"); v && !read_string(*v, "suffix").empty()) bad("suffix", "is not supported");
  return r;
}

ApiRequest parse_chat_request(const json& body, const ParseLimits& limits, const SamplingParams& base) {
  ApiRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  r.sampling = base;
  parse_common(body, limits, r);
  const json* messages = field(body, "messages");
  if (!messages) bad("messages", "is required");
  if (!messages->is_array() || messages->empty()) bad("messages", "must be a non-empty array");
  for (const json& m : *messages) {
    if (!m.is_object()) bad("messages", "must hold objects");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad("messages", "each message needs a string 'role'");
    ChatMessage msg{role->get<std::string>(), message_content(m), nullptr, {}};
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      bad("messages", "role '" + msg.role + "' is not supported (system, user, assistant, tool)");
    if (const json* calls = field(m, "tool_calls")) {
      if (msg.role != "assistant") bad("messages", "only assistant messages may have 'tool_calls'");
      msg.tool_calls = read_tool_calls(*calls);
    }
    if (msg.role == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) bad("messages", "a tool message needs a string 'tool_call_id'");
      msg.tool_call_id = id->get<std::string>();
    }
    r.messages.push_back(std::move(msg));
  }
  if (const json* v = field(body, "logprobs")) r.logprobs = read_bool(*v, "logprobs");
  if (const json* v = field(body, "top_logprobs")) {
    r.top_logprobs = int32_t(read_int(*v, "top_logprobs", 0, limits.max_top_logprobs));
    if (!r.logprobs && r.top_logprobs > 0) bad("top_logprobs", "requires 'logprobs' to be true");
  }
  if (const json* v = field(body, "chat_template_kwargs"); v && !v->is_null()) {
    if (!v->is_object()) bad("chat_template_kwargs", "must be an object");
    // The variables the server sets itself cannot be replaced (add_generation_prompt: the reply must be the
    // assistant's turn).
    for (const char* reserved : {"messages", "add_generation_prompt", "tools", "documents", "bos_token", "eos_token",
                                 "unk_token", "pad_token"})
      if (v->contains(reserved))
        bad("chat_template_kwargs", std::string("may not set '") + reserved + "' (the server sets it)");
    r.chat_template_kwargs = *v;
  }
  return r;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t response_tokens(const ApiRequest& req, int64_t n_prompt_tokens) {
  return int64_t(req.sampling.max_tokens) + (req.echo ? n_prompt_tokens : 0);
}

uint64_t worst_case_response_bytes(const ApiRequest& req, size_t longest_piece, int64_t n_prompt_tokens) {
  const uint64_t escaped = 6 * uint64_t(longest_piece);  // "\u00XX" per byte at worst
  uint64_t per_token = escaped;                           // the text
  if (req.logprobs) {
    // {"token": ..., "logprob": ..., "bytes": [...], "top_logprobs": [...]}: the token and each alternative carry
    // their escaped piece, up to four bytes of "255," per byte, a number and the keys.
    const uint64_t entry = escaped + 4 * uint64_t(longest_piece) + 96;
    per_token += (1 + uint64_t(req.top_logprobs)) * entry + 64;
  }
  uint64_t prompt_logprobs = 0;  // {"id": {"logprob": ..., "rank": ..., "decoded_token": ...}} per alternative
  if (req.prompt_logprobs >= 0)
    prompt_logprobs = uint64_t(n_prompt_tokens) * (uint64_t(req.prompt_logprobs) + 1) * (escaped + 96);
  return uint64_t(req.n) * (uint64_t(response_tokens(req, n_prompt_tokens)) * per_token + prompt_logprobs + 512) +
         prompt_logprobs + 1024;
}

const char* finish_reason_string(FinishReason reason, bool called_tools) {
  return called_tools && reason == FinishReason::Stop ? "tool_calls" : finish_reason_string(reason);
}

const char* finish_reason_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Timeout: return "timeout";
    case FinishReason::Cancelled:
    case FinishReason::Error: return "cancelled";
  }
  return "stop";
}

json usage_json(const Usage& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens > 0) j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return j;
}

json response_json(const ResponseHeader& h, const std::vector<ChoiceResult>& choices, const Usage& usage,
                   bool logprobs) {
  json out = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json choice = {{"index", int(i)},
                   {"finish_reason", finish_reason_string(c.finish_reason, !c.tool_calls.empty())}};
    if (h.endpoint == Endpoint::Completions) {
      choice["text"] = c.text;
      choice["logprobs"] = logprobs ? logprobs_completions(c.tokens, 0) : json(nullptr);
    } else if (c.has_tool_calls_parsed) {
      choice["message"] = {{"role", "assistant"},
                           {"content", c.content.empty() && !c.tool_calls.empty() ? json(nullptr) : json(c.content)}};
      if (!c.tool_calls.empty()) choice["message"]["tool_calls"] = tool_calls_json(c.tool_calls);
      choice["logprobs"] = logprobs ? logprobs_chat(c.tokens) : json(nullptr);
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      choice["logprobs"] = logprobs ? logprobs_chat(c.tokens) : json(nullptr);
    }
    out.push_back(std::move(choice));
  }
  return {{"id", h.id},
          {"object", object_name(h.endpoint, false)},
          {"created", h.created},
          {"model", h.model},
          {"choices", std::move(out)},
          {"usage", usage_json(usage)}};
}

json chunk_json(const ResponseHeader& h, int32_t index, std::string_view text, bool role,
                const std::vector<TokenInfo>* logprobs, int64_t text_offset, std::optional<FinishReason> finish,
                bool usage_null) {
  json choice = {{"index", index}};
  if (h.endpoint == Endpoint::Completions) {
    choice["text"] = std::string(text);
    choice["logprobs"] = logprobs ? logprobs_completions(*logprobs, text_offset) : json(nullptr);
  } else {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = std::string(text);
    choice["delta"] = std::move(delta);
    choice["logprobs"] = logprobs ? logprobs_chat(*logprobs) : json(nullptr);
  }
  choice["finish_reason"] = finish ? json(finish_reason_string(*finish)) : json(nullptr);
  json chunk = {{"id", h.id},
                {"object", object_name(h.endpoint, true)},
                {"created", h.created},
                {"model", h.model},
                {"choices", json::array({std::move(choice)})}};
  if (usage_null) chunk["usage"] = nullptr;
  return chunk;
}

json usage_chunk_json(const ResponseHeader& h, const Usage& usage) {
  return {{"id", h.id},           {"object", object_name(h.endpoint, true)},
          {"created", h.created}, {"model", h.model},
          {"choices", json::array()}, {"usage", usage_json(usage)}};
}

}  // namespace tessera::server
