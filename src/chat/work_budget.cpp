// The per-render work budget: thread-local, as one render runs on one thread from start to end.
#include "chat/work_budget.h"

#include "core/error.h"

namespace tessera::chat {
namespace {

struct State {
  uint64_t used = 0, limit = 0;
  bool active = false;
};

thread_local State state;

}  // namespace

WorkBudget::WorkBudget(uint64_t limit)
    : saved_used_(state.used), saved_limit_(state.limit), saved_active_(state.active) {
  state = State{0, limit, true};
}

WorkBudget::~WorkBudget() { state = State{saved_used_, saved_limit_, saved_active_}; }

void check_size(size_t bytes) {
  if (bytes > kMaxStringBytes) fail("the result would be larger than {} bytes", kMaxStringBytes);
}

void charge_work(uint64_t units) {
  State& s = state;
  if (!s.active) return;
  s.used += units;
  if (s.used > s.limit) {
    s.used = s.limit;  // later charges (while the error unwinds) fail the same way
    fail("the template did more work than a render may do ({} units: loops, expressions, bytes of text)", s.limit);
  }
}

}  // namespace tessera::chat
