// Server-sent events framing (text/event-stream) as OpenAI streams use it: one `data: <json>` event per
// chunk, `data: [DONE]` at the end.
#pragma once

#include <string>
#include <string_view>

namespace tessera::server {

// "data: <payload>\n\n". A payload with newlines is split into several data lines, as the SSE spec joins them.
std::string sse_event(std::string_view payload);
inline std::string sse_done() { return "data: [DONE]\n\n"; }

// One parsed event: its data lines joined with '\n', and an error the server reported in it. llama.cpp's
// llama-server reports a request that fails mid-stream (its KV cache full, say) in a line `error: <json>`, a
// field SSE does not define (a reader that follows the spec drops it), and then still sends `data: [DONE]`;
// other servers send `event: error` with the details in data. Either way `error` holds the payload.
struct SseEvent {
  std::string data;
  std::string error;
};

// Incremental parser for the client side (load generator, tests): feed bytes, get complete event payloads.
class SseParser {
 public:
  // Appends bytes; complete events are returned by next().
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete event; false when none is complete yet.
  bool next(SseEvent& event);
  // The next complete event's data (lines joined with '\n'); false when none is complete yet.
  bool next(std::string& data);

 private:
  std::string buffer_;
};

}  // namespace tessera::server
