// /tokenize and /detokenize bodies in, answers out.
#include "server/tokenization.h"

#include "server/body_fields.h"
#include "server/errors.h"
#include "server/openai_json.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

using nlohmann::json;

using body_fields::bad;
using body_fields::field;

bool flag(const json& body, const char* name, bool otherwise) {
  const json* v = field(body, name);
  return v ? body_fields::read_bool(*v, name) : otherwise;
}

// The body parsed (with parse_body's limits), an object, and naming the served model if any.
json read_body(const HttpRequest& http, const RequestPreparer& preparer) {
  json body = parse_body(http.body);
  if (!body.is_object()) throw ApiException(ErrorCode::InvalidRequest, "the request body must be a JSON object");
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) bad("model", "must be a string");
    preparer.check_model(model->get<std::string>());
  }
  return body;
}

}  // namespace

Tokenization::Tokenization(const RequestPreparer& preparer, const Tokenizer& tokenizer)
    : preparer_(preparer), tokenizer_(tokenizer) {}

json Tokenization::tokenize(const HttpRequest& http) const {
  const json body = read_body(http, preparer_);
  std::vector<int32_t> tokens;
  if (field(body, "messages")) {
    if (field(body, "prompt")) bad("prompt", "may not be given together with 'messages'");
    const PrepOptions& o = preparer_.options();
    ApiRequest chat = parse_chat_request(body, o.parse_limits, o.base_sampling);
    chat.structured = parse_structured_request(http.body, body, true);  // the tools the template shows
    tokens = preparer_.prompt_tokens(chat).front();
  } else {
    const json* prompt = field(body, "prompt");
    if (!prompt) bad("prompt", "is required (or 'messages')");
    if (!prompt->is_string()) bad("prompt", "must be a string");
    tokens = tokenizer_.encode(prompt->get_ref<const std::string&>(), flag(body, "add_special_tokens", true));
  }
  json strs = nullptr;
  if (flag(body, "return_token_strs", false)) {
    strs = json::array();
    for (int32_t id : tokens) strs.push_back(tokenizer_.vocab().tokens[size_t(id)]);
  }
  return {{"count", tokens.size()},
          {"max_model_len", preparer_.options().limits.n_ctx},
          {"tokens", tokens},
          {"token_strs", std::move(strs)}};
}

json Tokenization::detokenize(const HttpRequest& http) const {
  const json body = read_body(http, preparer_);
  const json* tokens = field(body, "tokens");
  if (!tokens) bad("tokens", "is required");
  if (!tokens->is_array()) bad("tokens", "must be an array of token ids");
  // Whatever a generation returns fits the context; more could make a few bytes of ids megabytes of text.
  const int64_t n_ctx = preparer_.options().limits.n_ctx;
  if (int64_t(tokens->size()) > n_ctx)
    bad("tokens", "holds " + std::to_string(tokens->size()) + " ids, more than the context's " + std::to_string(n_ctx));
  const int32_t n_vocab = tokenizer_.n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) bad("tokens", "must be an array of token ids");
    // Compared as int64: an unsigned 2^63 reads as negative, out of range either way.
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab || (t.is_number_unsigned() && t.get<uint64_t>() >= uint64_t(n_vocab)))
      bad("tokens", "holds " + t.dump() + ", outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
    ids.push_back(int32_t(id));
  }
  return {{"prompt", tokenizer_.decode(ids)}};
}

}  // namespace tessera::server
