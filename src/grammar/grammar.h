// A compiled grammar as requests share it: the automaton plus the masks learned for each vocabulary it has been
// used with (the costly part, so a grammar cached by the server by schema hash keeps getting cheaper).
// Thread-safe: the primary and fallback engines may use one grammar at the same time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/vocabulary.h"

namespace tessera::grammar {

struct GrammarCacheLimits {
  uint64_t state_mask_bytes = 8ull << 20;
  uint64_t position_mask_bytes = 24ull << 20;
};

class Grammar {
 public:
  explicit Grammar(CompiledGrammar automaton, GrammarCacheLimits limits = {})
      : automaton_(std::move(automaton)), limits_(limits) {}

  const CompiledGrammar& automaton() const { return automaton_; }
  // The mask cache for `vocab`, created on first use.
  std::shared_ptr<MaskCache> masks(const Vocabulary& vocab) const;
  // The automaton and every mask cache, in bytes.
  uint64_t bytes() const;

 private:
  CompiledGrammar automaton_;
  GrammarCacheLimits limits_;
  mutable std::mutex mutex_;
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<MaskCache>>> caches_;  // by Vocabulary::id()
};

// What a request asks of its output.
struct Constraint {
  std::shared_ptr<const Grammar> grammar;
  // Empty: the grammar constrains the output from its first byte. Otherwise the output is free text until this
  // string appears in it; the grammar, which must itself begin with this string, constrains the rest (a tool
  // call that the model chooses to start, from its opening tag on).
  std::string trigger;
  bool trigger_at_start = false;  // the trigger counts only as the very start of the output
};

}  // namespace tessera::grammar
