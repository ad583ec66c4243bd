// GGUF tokenizer metadata: Vocab -> key/values and back out of a file.
#include "tokenizer/vocab_gguf.h"

namespace tessera {

gguf::Metadata vocab_metadata(const Vocab& vocab) {
  using gguf::Value;
  gguf::Metadata m;
  m.emplace_back("tokenizer.ggml.model", Value::make_string(vocab.model));
  if (!vocab.pre.empty()) m.emplace_back("tokenizer.ggml.pre", Value::make_string(vocab.pre));
  m.emplace_back("tokenizer.ggml.tokens", Value::make_string_array(vocab.tokens));
  // Byte-level BPE ranks by merges; its scores are all zero and llama.cpp's converter leaves them out.
  if (vocab.model != "gpt2" && !vocab.scores.empty()) {
    m.emplace_back("tokenizer.ggml.scores", Value::make_f32_array(vocab.scores));
  }
  std::vector<int32_t> kinds;
  kinds.reserve(vocab.kinds.size());
  for (TokenKind k : vocab.kinds) kinds.push_back(static_cast<int32_t>(k));
  m.emplace_back("tokenizer.ggml.token_type", Value::make_i32_array(kinds));
  if (!vocab.merges.empty()) m.emplace_back("tokenizer.ggml.merges", Value::make_string_array(vocab.merges));
  if (vocab.bos >= 0) m.emplace_back("tokenizer.ggml.bos_token_id", Value::make_u32(uint32_t(vocab.bos)));
  if (vocab.eos >= 0) m.emplace_back("tokenizer.ggml.eos_token_id", Value::make_u32(uint32_t(vocab.eos)));
  if (vocab.unk >= 0) m.emplace_back("tokenizer.ggml.unknown_token_id", Value::make_u32(uint32_t(vocab.unk)));
  if (vocab.pad >= 0) m.emplace_back("tokenizer.ggml.padding_token_id", Value::make_u32(uint32_t(vocab.pad)));
  m.emplace_back("tokenizer.ggml.add_bos_token", Value::make_bool(vocab.add_bos));
  m.emplace_back("tokenizer.ggml.add_eos_token", Value::make_bool(vocab.add_eos));
  m.emplace_back("tokenizer.ggml.add_space_prefix", Value::make_bool(vocab.add_space_prefix));
  if (!vocab.chat_template.empty()) {
    m.emplace_back("tokenizer.chat_template", Value::make_string(vocab.chat_template));
  }
  if (!vocab.eog_ids.empty()) m.emplace_back("tessera.eog_token_ids", Value::make_i32_array(vocab.eog_ids));
  return m;
}

void write_vocab(gguf::Writer& writer, const Vocab& vocab) {
  for (auto& [key, value] : vocab_metadata(vocab)) writer.set(key, std::move(value));
}

gguf::Metadata tokenizer_metadata_of(const gguf::File& file) {
  gguf::Metadata m;
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with("tokenizer.") || key == "tessera.eog_token_ids") m.emplace_back(key, value);
  }
  return m;
}

void pad_vocab(Vocab& vocab, int64_t n_tokens) {
  while (int64_t(vocab.tokens.size()) < n_tokens) {
    vocab.tokens.push_back("[PAD" + std::to_string(vocab.tokens.size()) + "]");
    vocab.kinds.push_back(TokenKind::Unused);
    vocab.scores.push_back(0.0f);
  }
}

}  // namespace tessera
