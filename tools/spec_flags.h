// The speculative-decoding flags that run, serve and bench --offline share: --spec, --draft-model,
// --spec-tokens. Values are checked when the command runs, with an error naming the flag.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "engine/speculative_options.h"
#include "model/model.h"

namespace tessera {

struct SpecFlags {
  std::string method;      // "off", "ngram", "draft"; empty: "draft" with --draft-model, else "off"
  std::string draft_path;  // --draft-model FILE
  int64_t spec_tokens = 4; // --spec-tokens K
  std::string switch_policy = "cost";  // --spec-switch: "cost" (per step, the measured cost model) or "always"
};

void add_spec_options(CLI::App* cmd, SpecFlags& flags);

// The engine's speculative options: the draft model loaded (with `load`), its vocabulary checked against
// `target`'s. Throws tessera::Error naming the flag (an unknown method, K out of range, a missing or
// incompatible draft model).
SpeculativeOptions speculative_from_flags(const SpecFlags& flags, const Model& target, const LoadOptions& load,
                                          bool ignore_memory_check);

}  // namespace tessera
