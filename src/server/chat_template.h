// Chat prompts: the conversation rendered with the model's own Jinja chat template (src/chat), the way Hugging
// Face transformers renders it: `messages` (with tool_calls and tool_call_id), `add_generation_prompt` true,
// `tools` (the request's, or None) and `documents` None, the
// vocabulary's bos_token / eos_token (and unk_token / pad_token when it has them), plus the request's
// chat_template_kwargs (vLLM's extension: enable_thinking for Qwen3, ...). The template is parsed once, when the
// server starts; one that does not parse, or uses a construct the interpreter does not support, stops the
// server with the template's line and column (serving a chat model in a format it was not trained on would
// answer every request with garbage). `tessera serve --chat-template FILE` replaces a model's template.
//
// Fallback (the model has no template): the message contents joined by "\n", after the BOS piece when the
// vocabulary adds one: a base model simply continues the text.
//
// Special tokens (<|im_start|>, <|eot_id|>, ...) are emitted as text and turned into their ids by
// SpecialTokenEncoder (as llama.cpp's parse_special: a control token spelled in user text becomes the token).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/template.h"
#include "server/openai_json.h"
#include "tokenizer/special_token_trie.h"

namespace tessera {
class Tokenizer;
struct Vocab;
}

namespace tessera::server {

class ChatTemplate {
 public:
  // `source`: the Jinja template, empty for none. Throws chat::SyntaxError (a tessera::Error) when it does not
  // parse. `vocab` supplies the special-token variables; it is read here, not kept.
  ChatTemplate(const std::string& source, const Vocab& vocab);

  bool has_template() const { return template_.has_value(); }

  // The prompt with the assistant's turn opened. `kwargs`: extra template variables (an object); the names the
  // server sets keep the server's values (request parsing rejects them with a 400 first). Throws ApiException(TemplateError, 400) when the template
  // rejects the conversation: its raise_exception() message verbatim, or the interpreter's error.
  // `tools`: the request's tools (OpenAI's array), or null for the template's None.
  std::string render(const std::vector<ChatMessage>& messages,
                     const nlohmann::json& kwargs = nlohmann::json::object(),
                     const nlohmann::ordered_json* tools = nullptr) const;

 private:
  std::optional<chat::Template> template_;
  chat::Dict special_tokens_;  // bos_token, eos_token, unk_token, pad_token: those the vocabulary has
  std::string fallback_bos_;   // the BOS piece when the vocabulary adds BOS, else empty
};

// Encodes rendered chat text, mapping the vocabulary's control and user-defined tokens spelled in it (those of
// two or more bytes starting with '<' or '[', where chat formats put them) to their ids and tokenizing the text
// between them. Linear in the text: one trie walk per position. Holds a reference to the tokenizer.
class SpecialTokenEncoder {
 public:
  explicit SpecialTokenEncoder(const Tokenizer& tokenizer);
  // `add_bos`: prepend BOS when the vocabulary wants it and the text does not start with it already.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

 private:
  const Tokenizer& tokenizer_;
  SpecialTokenTrie specials_;  // longest match: "<|im_start|>" before "<|im"
};

}  // namespace tessera::server
