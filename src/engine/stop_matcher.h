// Finds stop strings in streamed text. Text that might be the start of a stop string is held back until it
// is known not to be, so a client never receives part of a stop string.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends decoded text; returns the text now safe to emit. After a stop string is found, `stopped()` is
  // true and the returned text ends just before it. `may_stop` false (min_tokens not reached yet): no stop string
  // counts, but a possible start of one is still held back, so one that ends once stops may count is found.
  std::string push(std::string_view text, bool may_stop = true);
  // Releases whatever is held back (generation ended for another reason).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace tessera
