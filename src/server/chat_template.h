// Chat prompts: the conversation rendered the way the model was trained, for the template families that
// matter (ChatML/Qwen, Llama-3, Llama-2, Mistral, Phi-3, Gemma), recognised from the GGUF's
// tokenizer.chat_template text. Not a Jinja interpreter: each family's format is written out here.
//
// Fallback (no template, or one that matches no family): the message contents joined by "\n", the system
// message first, nothing after the last one: a base model simply continues the text.
//
// Special tokens (<|im_start|>, <|eot_id|>, ...) are emitted as text and turned into their ids by
// SpecialTokenEncoder (as llama.cpp's parse_special: a control token spelled in user text becomes the token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/openai_json.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::server {

enum class ChatFamily { Fallback, ChatML, Llama3, Llama2, Mistral, Phi3, Gemma };
const char* chat_family_name(ChatFamily family);

// Recognises the family from a Jinja template's text (empty: Fallback).
ChatFamily detect_chat_family(std::string_view template_text);

class ChatTemplate {
 public:
  // `bos_text`: the vocabulary's BOS piece ("<s>", "<|begin_of_text|>", "<bos>"); empty when it has none.
  ChatTemplate(ChatFamily family, std::string template_text, std::string bos_text);

  ChatFamily family() const { return family_; }
  // The prompt with the assistant's turn opened. Throws ApiException(TemplateError) for a conversation the
  // family cannot express (Gemma has no system role; Llama-2, Mistral and Gemma need user/assistant turns).
  std::string render(const std::vector<ChatMessage>& messages) const;

 private:
  ChatFamily family_;
  std::string template_text_;
  std::string bos_text_;
};

// Encodes rendered chat text, mapping the vocabulary's control and user-defined tokens spelled in it to their
// ids and tokenizing the text between them. Holds a reference to the tokenizer.
class SpecialTokenEncoder {
 public:
  explicit SpecialTokenEncoder(const Tokenizer& tokenizer);
  // `add_bos`: prepend BOS when the vocabulary wants it and the text does not start with it already.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

 private:
  const Tokenizer& tokenizer_;
  std::vector<std::pair<std::string, int32_t>> specials_;  // longest first: "<|im_start|>" before "<|im"
};

}  // namespace tessera::server
