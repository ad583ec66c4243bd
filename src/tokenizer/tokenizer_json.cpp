// tokenizer.json -> Vocab: the BPE model (byte-level, or SentencePiece-style with byte fallback), the added tokens,
// the pre-tokenizer family and special ids.
#include "tokenizer/tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <limits>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "core/json_file.h"

namespace tessera {
namespace {

using nlohmann::json;

// The split regexes of the supported families, exactly as their tokenizer.json files spell them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Flattens a pre-tokenizer (possibly a Sequence) into its steps.
void collect_steps(const json& node, std::vector<const json*>& steps) {
  if (node.is_null()) return;
  if (node.value("type", "") == "Sequence") {
    for (const json& child : node.at("pretokenizers")) collect_steps(child, steps);
    return;
  }
  steps.push_back(&node);
}

// GGUF pre-tokenizer name for the tokenizer.json pre_tokenizer, or throws.
std::string detect_pre(const json& pre_tokenizer, const std::string& path) {
  std::vector<const json*> steps;
  collect_steps(pre_tokenizer, steps);
  bool byte_level = false;
  std::string pre;
  for (const json* step : steps) {
    const std::string type = step->value("type", "");
    if (type == "ByteLevel") {
      byte_level = true;
      if (step->value("use_regex", true) && pre.empty()) pre = "gpt-2";
      if (step->value("add_prefix_space", false))
        fail("{}: pre_tokenizer ByteLevel with add_prefix_space is not supported", path);
    } else if (type == "Split") {
      const json& pattern = step->at("pattern");
      if (!pattern.contains("Regex")) fail("{}: pre_tokenizer Split without a regex is not supported", path);
      const std::string regex = pattern.at("Regex").get<std::string>();
      if (regex == kGpt2Regex) {
        pre = "gpt-2";
      } else if (regex == kLlama3Regex) {
        pre = "llama-bpe";
      } else if (regex == kQwen2Regex) {
        pre = "qwen2";
      } else {
        fail("{}: pre-tokenizer regex '{}' is not supported (supported: the GPT-2, Llama-3 and Qwen2 patterns)",
             path, regex);
      }
    } else {
      fail("{}: pre_tokenizer type '{}' is not supported", path, type);
    }
  }
  if (!byte_level) fail("{}: not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer)", path);
  if (pre.empty()) fail("{}: byte-level pre-tokenizer without a split regex is not supported", path);
  return pre;
}

// SentencePiece-style BPE (byte_fallback: Llama 2, Mistral, TinyLlama): spaces become "▁" either through the
// normalizer (Prepend "▁" + Replace " " -> "▁") or a Metaspace pre-tokenizer. Returns whether a "▁" is put in
// front of the text (SentencePiece's add_dummy_prefix, GGUF's add_space_prefix); throws for anything else.
bool detect_spm_space_prefix(const json& root, const std::string& path) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  bool prefix = false, spaces_mapped = false;
  std::vector<const json*> steps;
  const json& normalizer = root.value("normalizer", json());
  if (!normalizer.is_null() && normalizer.value("type", "") == "Sequence") {
    for (const json& n : normalizer.at("normalizers")) steps.push_back(&n);
  } else if (!normalizer.is_null()) {
    steps.push_back(&normalizer);
  }
  for (const json* step : steps) {
    const std::string type = step->value("type", "");
    if (type == "Prepend" && step->value("prepend", "") == kSpace) {
      prefix = true;
    } else if (type == "Replace" && step->at("pattern").value("String", "") == " " && step->value("content", "") == kSpace) {
      spaces_mapped = true;
    } else {
      fail("{}: normalizer step '{}' is not supported for a SentencePiece-style tokenizer", path, type);
    }
  }
  const json& pre = root.value("pre_tokenizer", json());
  if (!pre.is_null()) {
    if (pre.value("type", "") != "Metaspace" || pre.value("replacement", std::string(kSpace)) != kSpace) {
      fail("{}: pre_tokenizer '{}' is not supported for a SentencePiece-style tokenizer", path, pre.value("type", "?"));
    }
    spaces_mapped = true;
    const std::string scheme = pre.value("prepend_scheme", pre.value("add_prefix_space", true) ? "always" : "never");
    prefix = prefix || scheme != "never";
  }
  if (!spaces_mapped) fail("{}: a SentencePiece-style tokenizer must map spaces to U+2581", path);
  return prefix;
}

// Tessera's SentencePiece BPE merges the adjacent pair whose joined piece scores highest; Hugging Face's BPE applies
// merges by rank. Giving each piece the negated rank of the first merge that makes it turns one into the other
// (the merges of these tokenizer.json files list every split of every piece, ordered by the SentencePiece
// score). Pieces no merge makes rank below all others.
void spm_scores_from_merges(Vocab& vocab, const std::vector<std::string>& merges) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.kinds[id] == TokenKind::Normal) ids.emplace(vocab.tokens[id], int32_t(id));
  }
  for (size_t id = 0; id < vocab.tokens.size(); ++id) vocab.scores[id] = -float(merges.size() + id);
  for (size_t rank = merges.size(); rank-- > 0;) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    if (space == std::string::npos) continue;
    const auto it = ids.find(merge.substr(0, space) + merge.substr(space + 1));
    if (it != ids.end()) vocab.scores[size_t(it->second)] = -float(rank);  // lowest rank last, so it wins
  }
}

// A special token in tokenizer_config.json: a string, an {"content": ...} object or null.
std::string config_token(const json& config, const char* key) {
  if (!config.contains(key)) return {};
  const json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content")) return value.at("content").get<std::string>();
  return {};
}

}  // namespace

Vocab vocab_from_tokenizer_json(const std::string& path) {
  const json root = read_json_file(path);
  Vocab vocab;
  vocab.model = "gpt2";
  vocab.add_bos = false;
  vocab.add_space_prefix = false;
  bool spm = false;
  std::string unk_token;
  try {
    const json& model = root.at("model");
    const std::string type = model.value("type", "BPE");
    if (type != "BPE") fail("{}: model type '{}' is not supported (only BPE)", path, type);
    spm = model.value("byte_fallback", false);
    if (spm) {
      vocab.model = "llama";
      vocab.add_space_prefix = detect_spm_space_prefix(root, path);
      if (model.contains("unk_token") && model.at("unk_token").is_string()) unk_token = model.at("unk_token");
    } else {
      const json& normalizer = root.value("normalizer", json());
      if (!normalizer.is_null() && normalizer.value("type", "") != "NFC")
        fail("{}: normalizer '{}' is not supported", path, normalizer.value("type", "?"));
      vocab.pre = detect_pre(root.value("pre_tokenizer", json()), path);
    }

    // Ids may leave holes (added tokens placed after a padded vocabulary): they become unused tokens.
    int64_t n_vocab = 0;
    for (const auto& [text, id] : model.at("vocab").items()) n_vocab = std::max<int64_t>(n_vocab, id.get<int64_t>() + 1);
    const json& added = root.value("added_tokens", json::array());
    for (const json& token : added) n_vocab = std::max<int64_t>(n_vocab, token.at("id").get<int64_t>() + 1);
    if (n_vocab <= 0 || n_vocab > std::numeric_limits<int32_t>::max())
      fail("{}: vocabulary size {} is not valid", path, n_vocab);
    vocab.tokens.assign(n_vocab, std::string());
    vocab.kinds.assign(n_vocab, TokenKind::Unused);
    vocab.scores.assign(n_vocab, 0.0f);
    for (const auto& [text, id_json] : model.at("vocab").items()) {
      const int64_t id = id_json.get<int64_t>();
      if (id < 0) fail("{}: model.vocab['{}'] has negative id {}", path, text, id);
      vocab.tokens[id] = text;
      vocab.kinds[id] = TokenKind::Normal;
      // SentencePiece's byte-fallback pieces, "<0x00>".."<0xFF>".
      if (spm && text.size() == 6 && text.starts_with("<0x") && text.back() == '>') vocab.kinds[id] = TokenKind::Byte;
      if (spm && text == unk_token) vocab.kinds[id] = TokenKind::Unknown;
    }
    for (const json& token : added) {
      const int64_t id = token.at("id").get<int64_t>();
      if (id < 0) fail("{}: added token with negative id {}", path, id);
      vocab.tokens[id] = token.at("content").get<std::string>();
      vocab.kinds[id] = token.value("special", false) ? TokenKind::Control : TokenKind::UserDefined;
      if (spm && vocab.tokens[id] == unk_token) vocab.kinds[id] = TokenKind::Unknown;
    }
    for (int64_t id = 0; id < n_vocab; ++id) {
      if (vocab.kinds[id] == TokenKind::Unused) vocab.tokens[id] = "[PAD" + std::to_string(id) + "]";
    }

    const json& merges = model.at("merges");
    vocab.merges.reserve(merges.size());
    for (const json& merge : merges) {
      if (merge.is_string()) {
        vocab.merges.push_back(merge.get<std::string>());
      } else if (merge.is_array() && merge.size() == 2) {
        vocab.merges.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
      } else {
        fail("{}: model.merges entry {} is neither \"a b\" nor [a, b]", path, merge.dump());
      }
    }
    if (spm) {
      spm_scores_from_merges(vocab, vocab.merges);
      vocab.merges.clear();  // SentencePiece ranks by score; GGUF "llama" vocabularies carry no merges
    }
  } catch (const json::exception& e) {
    fail("{}: unexpected tokenizer.json structure: {}", path, e.what());
  }

  const auto find_id = [&](const std::string& text) -> int32_t {
    if (text.empty()) return -1;
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
      if (vocab.tokens[id] == text && vocab.kinds[id] != TokenKind::Normal) return static_cast<int32_t>(id);
    }
    return -1;
  };
  const std::filesystem::path config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  std::optional<bool> add_bos;
  if (std::filesystem::exists(config_path)) {
    const json config = read_json_file(config_path.string());
    vocab.bos = find_id(config_token(config, "bos_token"));
    vocab.eos = find_id(config_token(config, "eos_token"));
    vocab.pad = find_id(config_token(config, "pad_token"));
    vocab.unk = find_id(config_token(config, "unk_token"));
    if (config.contains("add_bos_token") && config.at("add_bos_token").is_boolean())
      add_bos = config.at("add_bos_token").get<bool>();
  }
  // Without a config, the family's conventional names.
  if (vocab.bos < 0) vocab.bos = find_id(spm ? "<s>" : vocab.pre == "llama-bpe" ? "<|begin_of_text|>" : "");
  if (vocab.eos < 0) vocab.eos = find_id(spm ? "</s>" : vocab.pre == "llama-bpe" ? "<|end_of_text|>" : "<|endoftext|>");
  if (vocab.unk < 0) vocab.unk = find_id(unk_token);
  // Llama-3 prepends BOS (its post-processor's template; llama.cpp does the same for llama-bpe), and so does
  // SentencePiece Llama/Mistral.
  vocab.add_bos = add_bos.value_or(spm || vocab.pre == "llama-bpe") && vocab.bos >= 0;

  validate_vocab(vocab, path);
  return vocab;
}

}  // namespace tessera
