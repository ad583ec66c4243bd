// Names of request outcomes as the OpenAI API spells them.
#include "engine/request.h"

#include "core/error.h"

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
  if (prompt.empty()) fail("the prompt is empty (no tokens)");
  for (int32_t id : prompt) {
    if (id < 0 || id >= n_vocab) fail("token id {} is outside the vocabulary (0..{})", id, n_vocab - 1);
  }
}

}  // namespace tessera
