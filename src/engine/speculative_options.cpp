// Checks of the speculative options against the target model.
#include "engine/speculative_options.h"

#include <fmt/format.h>

#include "tokenizer/vocab.h"

namespace tessera {

const char* spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::Off: return "off";
    case SpecMethod::Ngram: return "ngram";
    case SpecMethod::Draft: return "draft";
  }
  return "unknown";
}

std::string speculative_problem(const SpeculativeOptions& options, const Model& target) {
  if (!options.enabled()) return {};
  if (options.spec_tokens < 1 || options.spec_tokens > kMaxSpecTokens)
    return fmt::format("spec tokens must be in 1..{} (got {})", kMaxSpecTokens, options.spec_tokens);
  if (options.method != SpecMethod::Draft) return {};
  if (!options.draft_model) return "speculative decoding with a draft model needs the draft model";
  const Model& draft = *options.draft_model;
  if (std::string diff = vocab_difference(target.tokenizer().vocab(), draft.tokenizer().vocab()); !diff.empty())
    return fmt::format("the draft model {} cannot draft for {}: their vocabularies differ ({})", draft.name(),
                       target.name(), diff);
  if (draft.config().n_vocab != target.config().n_vocab)
    return fmt::format("the draft model's logits have {} entries, the target's {}", draft.config().n_vocab,
                       target.config().n_vocab);
  return {};
}

}  // namespace tessera
