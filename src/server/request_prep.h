// What a worker thread makes of a generation request before the gateway's stateful steps (token budget, result
// cache, queue, engine): the body parsed and validated (structured-output fields compiled into the request's
// constraint), the priority and deadline headers applied and checked
// against the API key's allowance, the prompt rendered and tokenized, and its size checked against the context
// and, for a complete (non-streaming) response, against --max-response-bytes. Reads only state fixed at start-up,
// so it runs on any thread; every failure is an ApiException.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/auth.h"
#include "server/chat_template.h"
#include "server/http_server.h"
#include "server/openai_json.h"
#include "server/structured_output.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::server {

struct PrepOptions {
  std::string model_name;     // what `model` must name (or omit)
  RequestLimits limits;       // the primary engine's (Engine::limits()): requests are checked against them
  ParseLimits parse_limits;
  SamplingParams base_sampling;
  int64_t default_timeout_ms = 0;             // 0: none unless the request sets one
  uint64_t max_response_bytes = 256ull << 20;  // a complete response's worst case above this is a 400
  // A stream's echo with logprobs is written at once: above this a 400 (half of HttpServerOptions'
  // max_buffered_bytes, past which a stream is dropped).
  uint64_t max_stream_echo_bytes = 4ull << 20;
};

// The engine request for an API request's prompt: every choice of it (n), prompt computed once. Deadline and
// the Started report are the caller's to add.
Request engine_request(const ApiRequest& request, const std::vector<int32_t>& prompt);

struct PreparedRequest {
  ApiRequest request;  // priority and timeout_ms filled from the headers and the key
  // Each prompt's token ids (one, or a completions batch's), within the context together with max_tokens.
  std::vector<std::vector<int32_t>> prompts;
};

class RequestPreparer {
 public:
  // Keeps references: all must outlive it.
  // `structured`: compiles (and caches) the constraints of response formats and tools; thread-safe.
  RequestPreparer(const Tokenizer& tokenizer, const ChatTemplate& chat_template, const SpecialTokenEncoder& encoder,
                  StructuredOutput& structured, PrepOptions options);

  // `key`: the request's API key, null without keys. Throws ApiException.
  PreparedRequest prepare(Endpoint endpoint, const HttpRequest& http, const ApiKey* key) const;
  // The prompts' token ids as generation sees them: a chat request's messages rendered with the template, a
  // completion's texts with the vocabulary's special tokens, or its token ids as given.
  std::vector<std::vector<int32_t>> prompt_tokens(const ApiRequest& request) const;
  // A 404 when `model` is given and is not the served model's name.
  void check_model(const std::string& model) const;
  const PrepOptions& options() const { return options_; }

 private:
  // A text prompt too long for the context whatever it tokenizes to is refused before it is tokenized.
  void check_text_fits(size_t bytes, const char* param) const;
  // The worst case of a complete response against max_response_bytes, and of a stream's echo against
  // max_stream_echo_bytes: a 400 naming what to ask for less of.
  void check_response_size(const ApiRequest& request, const std::vector<std::vector<int32_t>>& prompts) const;

  const Tokenizer& tokenizer_;
  const ChatTemplate& chat_template_;
  const SpecialTokenEncoder& encoder_;
  StructuredOutput& structured_;
  PrepOptions options_;
  size_t longest_piece_ = 1;  // bytes of the longest token piece: no token stands for more text than this
};

}  // namespace tessera::server
