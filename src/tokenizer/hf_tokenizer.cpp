// Hugging Face folder tokenizer: tokenizer.json plus the files beside it that say how the model is prompted and
// when it stops.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/tokenizer_json.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string chat_template_of(const json& config, const std::string& path) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return {};
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  // Some models ship several named templates (default, tool_use, rag); the default one renders plain chats.
  if (t.is_array()) {
    const json* first = nullptr;
    for (const json& entry : t) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
      if (first == nullptr) first = &entry;
      if (entry.value("name", "") == "default") return entry["template"].get<std::string>();
    }
    if (first != nullptr) return (*first)["template"].get<std::string>();
  }
  fail("{}: chat_template is neither a string nor a list of {{name, template}}", path);
}

// eos_token_id: an id, a list of ids, or absent/null.
std::vector<int64_t> stop_ids_of(const json& config, const std::string& path) {
  std::vector<int64_t> ids;
  if (!config.is_object() || !config.contains("eos_token_id")) return ids;
  const json& v = config["eos_token_id"];
  const auto add = [&](const json& id) {
    if (!id.is_number_integer()) fail("{}: eos_token_id holds {}, not a token id", path, id.dump());
    ids.push_back(id.get<int64_t>());
  };
  if (v.is_array()) {
    for (const json& id : v) add(id);
  } else if (!v.is_null()) {
    add(v);
  }
  return ids;
}

}  // namespace

HfTokenizer load_hf_tokenizer(const std::string& path) {
  const bool is_dir = fs::is_directory(path);
  const fs::path dir = is_dir ? fs::path(path) : fs::path(path).parent_path();
  const fs::path tokenizer_json = is_dir ? dir / "tokenizer.json" : fs::path(path);
  if (!fs::exists(tokenizer_json)) {
    fail("{}: no tokenizer.json (Tessera reads byte-level BPE tokenizers from tokenizer.json)", dir.string());
  }
  HfTokenizer t;
  t.vocab = vocab_from_tokenizer_json(tokenizer_json.string());
  t.notes.push_back(fmt::format("tokenizer: {} ({} / {} pre-tokenizer, {} tokens, {} merges)", tokenizer_json.string(),
                                t.vocab.model, t.vocab.pre, t.vocab.tokens.size(), t.vocab.merges.size()));

  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    t.vocab.chat_template = chat_template_of(read_json_file(config_path.string()), config_path.string());
    if (!t.vocab.chat_template.empty()) t.chat_template_source = config_path.string();
  }
  // Newer folders keep the template in its own file.
  if (t.vocab.chat_template.empty() && fs::exists(dir / "chat_template.jinja")) {
    t.vocab.chat_template = read_text_file((dir / "chat_template.jinja").string());
    t.chat_template_source = (dir / "chat_template.jinja").string();
  }
  t.notes.push_back(t.vocab.chat_template.empty() ? std::string("chat template: none")
                                                  : fmt::format("chat template: {} ({} bytes)", t.chat_template_source,
                                                                t.vocab.chat_template.size()));

  fs::path stops_path = dir / "generation_config.json";
  if (!fs::exists(stops_path)) stops_path = dir / "config.json";
  if (fs::exists(stops_path)) {
    const std::vector<int64_t> ids = stop_ids_of(read_json_file(stops_path.string()), stops_path.string());
    std::string listed;
    for (int64_t id : ids) {
      if (id < 0 || id >= int64_t(t.vocab.tokens.size())) {
        fail("{}: eos_token_id {} is outside the vocabulary ({} tokens)", stops_path.string(), id,
             t.vocab.tokens.size());
      }
      if (t.vocab.eos < 0) {
        t.vocab.eos = int32_t(id);
      } else if (id != t.vocab.eos &&
                 std::find(t.vocab.eog_ids.begin(), t.vocab.eog_ids.end(), int32_t(id)) == t.vocab.eog_ids.end()) {
        t.vocab.eog_ids.push_back(int32_t(id));
      }
      listed += fmt::format("{}{} {}", listed.empty() ? "" : ", ", id, t.vocab.tokens[size_t(id)]);
    }
    if (!ids.empty()) t.notes.push_back(fmt::format("stop tokens ({}): {}", stops_path.filename().string(), listed));
  }
  validate_vocab(t.vocab, tokenizer_json.string());
  return t;
}

}  // namespace tessera
