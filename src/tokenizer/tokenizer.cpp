// Tokenizer pieces shared by every implementation: end-of-generation ids, the factory, streaming decode.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "core/utf8.h"

namespace tessera {
namespace {

// End-of-turn tokens of common chat models; their GGUF files often name only the base EOS.
constexpr std::array<std::string_view, 12> kEndOfTurnTexts = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>",         "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>", "<EOT>",      "_<EOT>",   "<end_of_utterance>",
};

}  // namespace

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }

void Tokenizer::init_eog_ids(const Vocab& vocab) {
  eog_ids_.clear();
  if (vocab.eos >= 0) eog_ids_.push_back(vocab.eos);
  eog_ids_.insert(eog_ids_.end(), vocab.eog_ids.begin(), vocab.eog_ids.end());
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const TokenKind kind = vocab.kinds[id];
    if (kind != TokenKind::Control && kind != TokenKind::UserDefined) continue;
    if (std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(), vocab.tokens[id]) != kEndOfTurnTexts.end())
      eog_ids_.push_back(static_cast<int32_t>(id));
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
}

std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab) {
  validate_vocab(vocab, "tokenizer");
  if (vocab.model == "llama") return std::make_unique<SpmTokenizer>(std::move(vocab));
  if (vocab.model == "gpt2") return std::make_unique<BpeTokenizer>(std::move(vocab));
  fail("tokenizer model '{}' is not supported (supported: 'llama', SentencePiece BPE; 'gpt2', byte-level BPE)",
       vocab.model);
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_leading_space)
    : tokenizer_(tokenizer), skip_leading_space_(skip_leading_space && tokenizer.vocab().add_space_prefix) {}

std::string IncrementalDecoder::push(int32_t id) {
  std::string piece = tokenizer_.token_piece(id);
  if (piece.empty()) return {};
  // Same rule as decode(): the first non-empty piece loses the space the encoder put in front of the text.
  if (at_start_) {
    at_start_ = false;
    if (skip_leading_space_ && piece.front() == ' ') piece.erase(0, 1);
  }
  pending_ += piece;

  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const utf8::Seq seq = utf8::scan(pending_, pos);
    if (seq.state == utf8::SeqState::Truncated) break;  // may still be completed by the next token
    if (seq.state == utf8::SeqState::Valid) {
      out.append(pending_, pos, seq.length);
    } else {
      out.append(utf8::kReplacement);
    }
    pos += seq.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace tessera
