// Serving: one API request in flight, from its admission to its last byte: its engine request (the prompt
// computed once, forked into its n choices; a choice re-run on the fallback is an engine request of its own), the
// stream or the body being built, the deadline, client disconnects, the queue slots it holds until each choice's
// first event, and the re-run on the fallback replica when the primary fails before a token of a choice was sent.
// All methods run on the io thread; engine events are posted there. A throw while handling an event ends this
// request with a 500 (or an error event on its stream), never the server. Also the one code that writes a
// response, which the result cache's replay of an earlier generation uses too.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/errors.h"
#include "server/gateway.h"
#include "server/http_server.h"
#include "server/lifecycle.h"
#include "server/metrics.h"
#include "server/openai_json.h"
#include "server/rate_limiter.h"
#include "server/request_workers.h"
#include "server/result_cache.h"
#include "server/tool_calls.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::server {

// What one request's life uses of the service around it: the io thread's context, the metrics, the gateway
// (token refunds, queue slots, the result cache), the lifecycle (in-flight count, the fallback, engine health)
// and the tokenizer both engines share. References: the service outlives its generations.
struct ServingContext {
  boost::asio::io_context& ioc;
  Metrics& metrics;
  Gateway& gateway;
  Lifecycle& lifecycle;
  const Tokenizer& tokenizer;
  const ToolCallFormat& tool_format;  // how the model writes tool calls (chat with tools)
  RequestWorkers& body_builder;       // where a large response body is built, off the io thread
};

// A JSON answer (counted by status) and an error answer (with Retry-After on 429 and 503).
void send_json(Responder& responder, Metrics& metrics, int status, const nlohmann::json& body,
               const Headers& extra = {});
void send_error(Responder& responder, Metrics& metrics, const ApiError& error);

// What a stream still owes one choice when it ends: its finish chunk, with the text and logprobs not sent yet.
struct ChoiceTail {
  int32_t index = 0;
  std::string_view text;
  bool role = false;                                 // chat: this is the choice's first chunk, it names the role
  const std::vector<TokenInfo>* logprobs = nullptr;  // null without logprobs
  int64_t text_offset = 0;                           // completions logprobs: offset of the first token above
  FinishReason finish = FinishReason::Stop;
};
// The end of a stream that went well: each choice's finish chunk, the usage chunk when asked, [DONE].
void finish_stream(Responder& responder, const ResponseHeader& header, const ApiRequest& request,
                   const std::vector<ChoiceTail>& tails, const Usage& usage);
// Whether a complete response is built off the io thread: with logprob lists (logprobs, prompt_logprobs), or
// texts over 256 KiB.
bool large_body(const ApiRequest& request, const std::vector<ChoiceResult>& choices);
// A 200 whose body `build` makes. A large one is built and serialized on the body builder's thread, then sent
// from the io thread: such a body can take seconds, and the io thread serves every other connection meanwhile
// (and the request workers every new request). The response counts as in flight until its bytes reach the
// connection.
using BodyBuilder = std::function<nlohmann::json()>;
void send_built_json(const ServingContext& ctx, std::shared_ptr<Responder> responder, bool large, BodyBuilder build,
                     Headers extra = {});
// A cached result sent as the generation that made it would have sent it, marked X-Tessera-Cache: hit.
void replay(const ServingContext& ctx, std::shared_ptr<Responder> responder, const ResponseHeader& header,
            const ApiRequest& request, std::shared_ptr<const CachedResult> hit);
// vLLM's prompt_logprobs list of a prompt: null, then {"id": {"logprob", "rank", "decoded_token"}} per token,
// with the `top` most likely tokens.
nlohmann::json prompt_logprobs_json(const std::vector<PositionLogprobs>& positions, int32_t top,
                                    const Tokenizer& tokenizer);

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  // Where the result is cached (cache keys empty: not cacheable) and whose token budget it was charged to.
  struct Accounting {
    std::string cache_key;           // under the primary's model name
    std::string fallback_cache_key;  // under the fallback's: an answer the fallback gave is cached there
    std::string limiter_key;
    RateLimits limits;
    double charged_tokens = 0.0;
  };

  Generation(const ServingContext& context, std::shared_ptr<Responder> responder, ApiRequest request,
             std::vector<std::vector<int32_t>> prompts, ResponseHeader header, Accounting accounting,
             std::optional<Clock::time_point> deadline);
  ~Generation();

  // Submits the choices to `engine` (the primary, or the fallback while the primary is marked bad), each
  // prompt's as one request of n samples; holds one queue slot per choice. Throws tessera::Error (EngineUnavailable when it
  // stops; engine_refusal() maps both) when the engine refuses the request: nothing is left running and no slot
  // held then.
  void start(Engine& engine);
  // Ends every running choice (client gone, drain timeout).
  void cancel();

 private:
  struct Choice {
    Engine* engine = nullptr;
    uint64_t id = 0;                // the engine request; shared by choices forked together
    bool running = false;
    bool on_fallback = false;
    bool streamed = false;          // a chunk of this choice reached the stream
    bool role_sent = false;
    bool finish_sent = false;       // the chunk with its finish_reason went out
    bool holds_queue_slot = false;  // released when it leaves the engine's queue (its first event)
    size_t prompt = 0;              // which of the request's prompts it continues
    bool echoed = false;            // echo: the prompt went out with its first chunk
    ChoiceResult result;
    std::vector<TokenInfo> pending; // logprobs not yet streamed
    int64_t text_offset = 0;        // completions logprobs: offset of the next streamed token
    Clock::time_point last_token;
    std::unique_ptr<ToolCallParser> tools;  // chat with tools: splits the reply into content and calls
  };

  // Submits choices [first, first + count) as one engine request of `count` samples (the prompt computed once,
  // then forked); throws what Engine::submit throws.
  void submit(size_t first, size_t count, Engine& engine);
  void on_event(size_t index, const StreamEvent& event, Clock::time_point at);
  void handle_event(size_t index, const StreamEvent& event, Clock::time_point at);
  // A throw while handling this request (a bug): it ends with a 500 or an error event; the server goes on.
  void fail_internal(const char* what);
  void release_queue_slot(Choice& c);
  void on_token(Choice& c, size_t index, const StreamEvent& event, Clock::time_point at);
  void on_finished(Choice& c, size_t index, const StreamEvent& event);
  // What one prompt brings to its choices: its tokens and, with echo, its text and its tokens' logprobs.
  struct PromptState {
    std::vector<int32_t> tokens;
    std::string echo_text;                // the prompt as given, or its tokens decoded
    std::vector<TokenInfo> echo_tokens;   // with logprobs: one per prompt token as the engine reports them
    int64_t next_position = 1;                // the next prompt position the engine's events may report
    std::vector<PositionLogprobs> positions;  // prompt_logprobs: positions 1.. as the engine reports them
    size_t echo_trimmed_token = 0;        // the token whose piece carries the tokenizer's leading space
    int64_t echo_trimmed_bytes = 0;       // and how many bytes of it the text leaves out (0 or 1)
  };
  void init_echo(PromptState& prompt, const std::string* text) const;
  // echo with logprobs: the prompt positions' logprobs, kept for every choice's echo (and for prompt_logprobs).
  void on_prompt_logprobs(PromptState& prompt, const StreamEvent& event) const;
  // echo: the prompt's text once per choice (empty after the first call, or without echo), its logprobs put in
  // front of c.pending.
  std::string take_echo(Choice& c);
  // The prompt's next echoed token's piece, and its share of the echoed text.
  TokenInfo echo_token(const PromptState& prompt, int32_t id) const;
  void stream_chunk(Choice& c, size_t index, std::string_view text, std::optional<FinishReason> finish);
  // Chat with tools: `text` through the choice's parser; its content and tool-call deltas are streamed.
  void on_reply_text(Choice& c, size_t index, std::string_view text, bool end);
  void stream_tool_delta(Choice& c, size_t index, const ReplyDelta& delta);
  std::unique_ptr<ToolCallParser> new_tool_parser(size_t index) const;
  void ensure_stream_started();
  void complete();
  void respond();  // the final bytes: body, error, or the stream's end
  void fail(const ApiError& error);
  bool deadline_passed() const;
  // Gives back the in-flight count and the connection once nothing more will be written.
  void release();

  ServingContext ctx_;
  std::shared_ptr<Responder> responder_;
  ApiRequest request_;
  std::vector<PromptState> prompts_;
  ResponseHeader header_;
  Accounting accounting_;
  std::optional<Clock::time_point> deadline_;
  std::unique_ptr<boost::asio::steady_timer> deadline_timer_;
  std::vector<Choice> choices_;
  size_t n_running_ = 0;
  bool stream_started_ = false;
  bool client_gone_ = false;
  bool done_ = false;  // the response is complete (or failed)
  bool counted_ = true;  // counted in the lifecycle's requests in flight until release()
  std::optional<ApiError> error_;
  int64_t n_cached_prompt_tokens_ = 0;
};

}  // namespace tessera::server
