// Server-sent events framing (text/event-stream) as OpenAI streams use it: one `data: <json>` event per
// chunk, `data: [DONE]` at the end.
#pragma once

#include <string>
#include <string_view>

namespace tessera::server {

// "data: <payload>\n\n". A payload with newlines is split into several data lines, as the SSE spec joins them.
std::string sse_event(std::string_view payload);
inline std::string sse_done() { return "data: [DONE]\n\n"; }

// Incremental parser for the client side (load generator, tests): feed bytes, get complete event payloads.
class SseParser {
 public:
  // Appends bytes; complete events are returned by next().
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete event's data (lines joined with '\n'); false when none is complete yet.
  bool next(std::string& data);

 private:
  std::string buffer_;
};

}  // namespace tessera::server
