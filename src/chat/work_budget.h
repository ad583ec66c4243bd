// The work one render may do. A template is a program that comes with a model file, and jinja2 sets it no
// limit: two nested loops over range(100000), or a 60 MB string scanned in a loop, would hold a server thread
// for hours. Each render gets a budget of work units, charged where the interpreter works: one per statement,
// expression and loop iteration, one per item a list is built from or iterated, one per 16 bytes of text created,
// printed, copied or compared, one per 4 bytes of text handled a code point at a time (decoded, stripped, sliced,
// searched for a long pattern). A unit is some 5-100 ns in a release build, whatever charges it. A render that
// spends the budget fails with a RenderError on the line it reached.
//
// Beside the budget, the size of what a render may build: strings and lists up to kMaxStringBytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::chat {

// At most a second or two of rendering; the real templates in shared/ over 1000 messages of 10 KB (a 10 MB
// prompt, far past any model's context) use 2-5 M units.
inline constexpr uint64_t kDefaultMaxWork = uint64_t(32) << 20;

// Installs `limit` as the budget of the render running on this thread, for the scope's lifetime.
class WorkBudget {
 public:
  explicit WorkBudget(uint64_t limit);
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

 private:
  uint64_t saved_used_, saved_limit_;  // an enclosing budget's state (none in practice: renders do not nest)
  bool saved_active_;
};

// Strings longer than this are refused rather than built ('a' * 10**12 must not take the server down).
inline constexpr size_t kMaxStringBytes = size_t(64) << 20;
// Throws Error ("the result would be larger than ... bytes") when a string of `bytes`, or a list whose items take
// `bytes`, would pass kMaxStringBytes: every operation that can multiply the size of its input checks this.
void check_size(size_t bytes);

// Charges `units` to the current render's budget; throws Error once it is spent. Free outside a render
// (building the context, parsing).
void charge_work(uint64_t units);
inline void charge_bytes(size_t bytes) { charge_work(bytes / 16); }  // copied, scanned, compared
inline void charge_chars(size_t bytes) { charge_work(bytes / 4); }   // handled one code point at a time

}  // namespace tessera::chat
