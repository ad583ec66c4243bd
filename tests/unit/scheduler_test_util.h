// Shared by the scheduler tests: a sequence of n_prompt consecutive token ids that may grow by max_new.
#pragma once

#include <cstdint>
#include <numeric>

#include "sched/sequence.h"

namespace tessera::testing {

inline Sequence make_seq(uint64_t id, int n_prompt, int max_new, int32_t priority = 0, int first_token = 1000) {
  Sequence s;
  s.id = id;
  s.arrival = id;
  s.priority = priority;
  s.tokens.resize(size_t(n_prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), first_token);
  s.n_prompt = n_prompt;
  s.max_len = n_prompt + max_new;
  return s;
}

}  // namespace tessera::testing
