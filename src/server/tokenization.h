// vLLM's /tokenize and /detokenize, for clients that count or inspect tokens before they send a prompt: a text
// prompt, or chat messages rendered as generation renders them, to token ids; token ids back to text. No engine
// is involved: both run on the request workers (a chat template is CPU work) and read only state fixed at
// start-up. Bad input is an ApiException.
#pragma once

#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "server/request_prep.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::server {

class Tokenization {
 public:
  // Keeps references: both must outlive it.
  Tokenization(const RequestPreparer& preparer, const Tokenizer& tokenizer);

  // {"prompt": text, "add_special_tokens": true} (the vocabulary's BOS/EOS as a completion adds them), or a chat
  // body {"messages", "tools", "chat_template_kwargs"} rendered as /v1/chat/completions renders it; with
  // "return_token_strs": true, also each token's vocabulary entry. Answers {"count", "max_model_len",
  // "tokens", "token_strs"}.
  nlohmann::json tokenize(const HttpRequest& http) const;
  // {"tokens": [ids]}: answers {"prompt": the text they stand for}.
  nlohmann::json detokenize(const HttpRequest& http) const;

 private:
  const RequestPreparer& preparer_;
  const Tokenizer& tokenizer_;
};

}  // namespace tessera::server
