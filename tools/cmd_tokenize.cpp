// `tessera tokenize`: text on stdin -> token ids, with the tokenizer of a GGUF file, a Hugging Face
// tokenizer.json or the embedded model. For users checking prompts, and for tests comparing with references.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "model/embedded_model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "core/utf8.h"

namespace tessera {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string tokenizer_path;
  bool json = false;
  bool no_bos = false;
  bool parse_special = false;
};

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizeOptions& o) {
  if (!o.tokenizer_path.empty()) return make_tokenizer(vocab_from_tokenizer_json(o.tokenizer_path));
  // A Hugging Face folder's tokenizer needs none of its weights.
  if (std::filesystem::is_directory(o.model_path)) return make_tokenizer(load_hf_tokenizer(o.model_path).vocab);
  auto file = o.model_path.empty() ? gguf::File::from_memory(embedded_model_bytes(), kEmbeddedModelName)
                                   : gguf::File::open(o.model_path);
  return make_tokenizer(vocab_from_gguf(*file));
}

// A piece as a readable quoted string: control characters and bytes that are not UTF-8 (a piece may hold part
// of a character) escaped.
std::string quote(const std::string& piece) {
  std::string out = "'";
  for (size_t pos = 0; pos < piece.size(); ++pos) {
    const char c = piece[pos];
    const auto byte = static_cast<uint8_t>(c);
    if (byte >= 0x80) {
      const utf8::Seq seq = utf8::scan(piece, pos);
      if (seq.state == utf8::SeqState::Valid) {
        out.append(piece, pos, seq.length);
        pos += seq.length - 1;
      } else {
        out += fmt::format("\\x{:02x}", byte);
      }
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "'";
}

int tokenize(const TokenizeOptions& o) {
  const auto tokenizer = load_tokenizer(o);
  std::ios::sync_with_stdio(false);
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const std::vector<int32_t> ids = tokenizer->encode(text, !o.no_bos, o.parse_special);
  if (o.json) {
    std::printf("%s\n", nlohmann::json{{"ids", ids}}.dump().c_str());
    return 0;
  }
  for (const int32_t id : ids) std::printf("%7d %s\n", id, quote(tokenizer->token_piece(id)).c_str());
  return 0;
}

}  // namespace

void add_tokenize_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of the text on stdin");
  auto o = std::make_shared<TokenizeOptions>();
  auto* model = cmd->add_option("-m,--model", o->model_path, "GGUF file or Hugging Face folder (default: the embedded model)");
  cmd->add_option("--tokenizer", o->tokenizer_path, "Hugging Face tokenizer.json instead of a GGUF file")
      ->excludes(model);
  cmd->add_flag("--json", o->json, "Print {\"ids\": [...]} instead of one id and piece per line");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS/EOS tokens the vocabulary asks for");
  cmd->add_flag("--parse-special", o->parse_special, "Turn control tokens written in the text into their ids");
  cmd->callback([&action, o] { action = [o] { return tokenize(*o); }; });
}

}  // namespace tessera
