// Reading the tokenizer.ggml.* metadata into a Vocab, and the checks every Vocab source shares.
#include "tokenizer/vocab.h"

#include <limits>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/printable.h"
#include "formats/gguf.h"

namespace tessera {
namespace {

// An array key's elements, or nullptr when the key is absent. Throws when the key holds something else.
const gguf::Array* find_array(const gguf::File& file, std::string_view key) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return nullptr;
  try {
    return &value->as_array();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", file.name(), key, e.what());
  }
}

// Special-token ids are written as uint32 by most converters, as int32 (-1 = none) by a few.
std::optional<int32_t> find_token_id(const gguf::File& file, std::string_view key) {
  const gguf::Value* value = file.find(key);
  if (value == nullptr) return std::nullopt;
  int64_t id = 0;
  try {
    id = value->as_int();
  } catch (const Error& e) {
    fail("{}: metadata key '{}': {}", file.name(), key, e.what());
  }
  if (id < 0) return -1;
  if (id > std::numeric_limits<int32_t>::max())
    fail("{}: metadata key '{}': token id {} is too large", file.name(), key, id);
  return static_cast<int32_t>(id);
}

TokenKind token_kind_from_gguf(int64_t type, const std::string& source, size_t index) {
  // 0 is GGUF's "undefined"; converters that do not know types write it for plain tokens.
  if (type == 0) return TokenKind::Normal;
  if (type < 1 || type > 6)
    fail("{}: tokenizer.ggml.token_type[{}] = {} is not a known token type", source, index, type);
  return static_cast<TokenKind>(type);
}

}  // namespace

Vocab vocab_from_gguf(const gguf::File& file) {
  const std::string& source = file.name();
  Vocab vocab;
  if (!file.find("tokenizer.ggml.model")) fail("{}: no tokenizer in file (missing 'tokenizer.ggml.model')", source);
  vocab.model = file.get_string("tokenizer.ggml.model");
  const bool is_spm = vocab.model == "llama";

  const auto* tokens = find_array(file, "tokenizer.ggml.tokens");
  if (tokens == nullptr) fail("{}: missing required metadata key 'tokenizer.ggml.tokens'", source);
  if (tokens->empty()) fail("{}: tokenizer.ggml.tokens is empty", source);
  const size_t n_vocab = tokens->size();
  if (n_vocab > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("{}: tokenizer.ggml.tokens has too many entries ({})", source, n_vocab);

  vocab.tokens.reserve(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) {
    try {
      vocab.tokens.emplace_back(tokens->string_at(i));
    } catch (const Error& e) {
      fail("{}: tokenizer.ggml.tokens[{}]: {}", source, i, e.what());
    }
  }

  // Scores drive SentencePiece merges, so an SPM vocabulary without them cannot tokenize correctly.
  if (const auto* scores = find_array(file, "tokenizer.ggml.scores")) {
    if (scores->size() != n_vocab)
      fail("{}: tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}", source, scores->size(),
           n_vocab);
    vocab.scores.reserve(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) {
      try {
        vocab.scores.push_back(static_cast<float>(scores->at(i).as_float()));
      } catch (const Error& e) {
        fail("{}: tokenizer.ggml.scores[{}]: {}", source, i, e.what());
      }
    }
  } else if (is_spm) {
    fail("{}: missing required metadata key 'tokenizer.ggml.scores' (needed by the 'llama' tokenizer)", source);
  } else {
    vocab.scores.assign(n_vocab, 0.0f);
  }

  if (const auto* types = find_array(file, "tokenizer.ggml.token_type")) {
    if (types->size() != n_vocab)
      fail("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", source, types->size(),
           n_vocab);
    vocab.kinds.reserve(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) {
      int64_t type = 0;
      try {
        type = types->at(i).as_int();
      } catch (const Error& e) {
        fail("{}: tokenizer.ggml.token_type[{}]: {}", source, i, e.what());
      }
      vocab.kinds.push_back(token_kind_from_gguf(type, source, i));
    }
  } else {
    vocab.kinds.assign(n_vocab, TokenKind::Normal);
  }

  if (const auto* merges = find_array(file, "tokenizer.ggml.merges")) {
    vocab.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      try {
        vocab.merges.emplace_back(merges->string_at(i));
      } catch (const Error& e) {
        fail("{}: tokenizer.ggml.merges[{}]: {}", source, i, e.what());
      }
    }
  }
  if (file.find("tokenizer.ggml.pre")) vocab.pre = file.get_string("tokenizer.ggml.pre");
  if (const auto* eog = find_array(file, "tessera.eog_token_ids")) {
    for (size_t i = 0; i < eog->size(); ++i) {
      try {
        const int64_t id = eog->at(i).as_int();
        if (id < 0 || id >= int64_t(n_vocab)) fail("token id {} is outside the vocabulary", id);
        vocab.eog_ids.push_back(int32_t(id));
      } catch (const Error& e) {
        fail("{}: tessera.eog_token_ids[{}]: {}", source, i, e.what());
      }
    }
  }
  if (file.find("tokenizer.chat_template")) vocab.chat_template = file.get_string("tokenizer.chat_template");

  // SentencePiece vocabularies reserve 0, 1, 2 for <unk>, <s>, </s> when the file does not say otherwise.
  vocab.bos = find_token_id(file, "tokenizer.ggml.bos_token_id").value_or(is_spm ? 1 : -1);
  vocab.eos = find_token_id(file, "tokenizer.ggml.eos_token_id").value_or(is_spm ? 2 : -1);
  vocab.unk = find_token_id(file, "tokenizer.ggml.unknown_token_id").value_or(is_spm ? 0 : -1);
  vocab.pad = find_token_id(file, "tokenizer.ggml.padding_token_id").value_or(-1);
  vocab.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(is_spm);
  vocab.add_eos = file.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  vocab.add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix").value_or(is_spm);

  validate_vocab(vocab, source);
  return vocab;
}

void validate_vocab(const Vocab& vocab, const std::string& source) {
  const size_t n_vocab = vocab.tokens.size();
  if (n_vocab == 0) fail("{}: the vocabulary is empty", source);
  if (vocab.scores.size() != n_vocab)
    fail("{}: vocabulary has {} tokens but {} scores", source, n_vocab, vocab.scores.size());
  if (vocab.kinds.size() != n_vocab)
    fail("{}: vocabulary has {} tokens but {} token types", source, n_vocab, vocab.kinds.size());
  for (size_t i = 0; i < n_vocab; ++i) {
    const auto kind = static_cast<int32_t>(vocab.kinds[i]);
    if (kind < 1 || kind > 6) fail("{}: token {} has unknown type {}", source, i, kind);
  }
  const auto check_id = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int64_t>(n_vocab))
      fail("{}: {} token id {} is outside the vocabulary (size {})", source, what, id, n_vocab);
  };
  check_id(vocab.bos, "BOS");
  check_id(vocab.eos, "EOS");
  check_id(vocab.unk, "unknown");
  check_id(vocab.pad, "padding");
  for (int32_t id : vocab.eog_ids) {
    if (id < 0) fail("{}: end-of-generation token id {} is negative", source, id);
    check_id(id, "end-of-generation");
  }
  if (vocab.add_bos && vocab.bos < 0) fail("{}: add_bos is set but the vocabulary has no BOS token", source);
  if (vocab.add_eos && vocab.eos < 0) fail("{}: add_eos is set but the vocabulary has no EOS token", source);
}

std::string vocab_difference(const Vocab& a, const Vocab& b) {
  if (a.tokens.size() != b.tokens.size())
    return fmt::format("{} tokens vs {}", a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    if (a.tokens[i] != b.tokens[i])
      return fmt::format("token {}: '{}' vs '{}'", i, printable(a.tokens[i]), printable(b.tokens[i]));
  }
  const std::pair<const char*, std::pair<int32_t, int32_t>> specials[] = {
      {"bos", {a.bos, b.bos}}, {"eos", {a.eos, b.eos}}, {"unk", {a.unk, b.unk}}};
  for (const auto& [name, ids] : specials) {
    if (ids.first != ids.second) return fmt::format("{} id {} vs {}", name, ids.first, ids.second);
  }
  return {};
}

}  // namespace tessera
