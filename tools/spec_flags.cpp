// --spec / --draft-model / --spec-tokens → SpeculativeOptions.
#include "spec_flags.h"

#include <filesystem>

#include "commands.h"
#include "core/error.h"

namespace tessera {

void add_spec_options(CLI::App* cmd, SpecFlags& flags) {
  cmd->add_option("--spec", flags.method,
                  "speculative decoding: off, ngram (prompt lookup) or draft (with --draft-model; the default "
                  "when it is given)");
  cmd->add_option("--draft-model", flags.draft_path,
                  "draft model for speculative decoding, with the target's vocabulary (e.g. an INT4 copy)");
  cmd->add_option("--spec-tokens", flags.spec_tokens,
                  fmt::format("draft tokens verified per step, 1..{}", kMaxSpecTokens))
      ->capture_default_str();
  cmd->add_option("--spec-switch", flags.switch_policy,
                  "cost: speculate per step where the measured step costs say it pays (default); always: every "
                  "step (for measurements)")
      ->capture_default_str();
}

SpeculativeOptions speculative_from_flags(const SpecFlags& flags, const Model& target, const LoadOptions& load,
                                          bool ignore_memory_check) {
  SpeculativeOptions o;
  const std::string method = flags.method.empty() ? (flags.draft_path.empty() ? "off" : "draft") : flags.method;
  if (method == "off") {
    if (!flags.draft_path.empty()) fail("--draft-model is given but --spec is off");
    return o;
  }
  if (method == "ngram") {
    o.method = SpecMethod::Ngram;
    if (!flags.draft_path.empty()) fail("--draft-model is given but --spec ngram uses no draft model");
  } else if (method == "draft") {
    o.method = SpecMethod::Draft;
    if (flags.draft_path.empty()) fail("--spec draft needs --draft-model FILE");
  } else {
    fail("unknown --spec '{}' (off, ngram, draft)", method);
  }
  if (flags.spec_tokens < 1 || flags.spec_tokens > kMaxSpecTokens)
    fail("--spec-tokens {} is out of range: 1..{}", flags.spec_tokens, kMaxSpecTokens);
  o.spec_tokens = flags.spec_tokens;
  if (flags.switch_policy == "always") {
    o.switch_policy = SpecSwitch::Always;
  } else if (flags.switch_policy != "cost") {
    fail("unknown --spec-switch '{}' (cost, always)", flags.switch_policy);
  }
  if (o.method == SpecMethod::Draft) {
    if (!std::filesystem::exists(flags.draft_path)) fail("--draft-model {}: no such file", flags.draft_path);
    o.draft_model = load_model_or_embedded(flags.draft_path, load, ignore_memory_check);
  }
  if (std::string problem = speculative_problem(o, target); !problem.empty()) fail("--draft-model: {}", problem);
  return o;
}

}  // namespace tessera
