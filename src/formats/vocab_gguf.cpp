// GGUF tokenizer metadata writer.
#include "formats/vocab_gguf.h"

namespace tessera {

void write_vocab(gguf::Writer& writer, const Vocab& vocab) {
  writer.set_string("tokenizer.ggml.model", vocab.model);
  writer.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  if (!vocab.scores.empty()) writer.set_f32_array("tokenizer.ggml.scores", vocab.scores);
  std::vector<int32_t> kinds;
  kinds.reserve(vocab.kinds.size());
  for (TokenKind k : vocab.kinds) kinds.push_back(static_cast<int32_t>(k));
  writer.set_i32_array("tokenizer.ggml.token_type", kinds);
  if (vocab.bos >= 0) writer.set_u32("tokenizer.ggml.bos_token_id", uint32_t(vocab.bos));
  if (vocab.eos >= 0) writer.set_u32("tokenizer.ggml.eos_token_id", uint32_t(vocab.eos));
  if (vocab.unk >= 0) writer.set_u32("tokenizer.ggml.unknown_token_id", uint32_t(vocab.unk));
  if (vocab.pad >= 0) writer.set_u32("tokenizer.ggml.padding_token_id", uint32_t(vocab.pad));
  writer.set_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  writer.set_bool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  writer.set_bool("tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
}

}  // namespace tessera
