// Names of request outcomes as the OpenAI API spells them.
#include "engine/request.h"

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

}  // namespace tessera
