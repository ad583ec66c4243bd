// Stop-string search over a small pending buffer (at most the longest stop string long).
#include "engine/stop_matcher.h"

#include <algorithm>

namespace tessera {

std::string StopMatcher::push(std::string_view text, bool may_stop) {
  if (stopped_) return {};
  const size_t old_size = pending_.size();
  pending_.append(text);
  size_t first_stop = std::string::npos;
  // Only a stop string that ends in the new text counts: what was held back before stops counted may hold a
  // whole short one inside a possible start of a longer one ("b" inside "ab" of "abc").
  if (may_stop)
    for (const auto& s : stops_)
      first_stop = std::min(first_stop, pending_.find(s, old_size >= s.size() ? old_size - s.size() + 1 : 0));
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first_stop);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

}  // namespace tessera
