// The chat template families, written out.
#include "server/chat_template.h"

#include <algorithm>

#include "server/errors.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

[[noreturn]] void template_error(const std::string& message) {
  throw ApiException(ErrorCode::TemplateError, "chat template: " + message, "messages");
}

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

bool contains(std::string_view text, std::string_view what) { return text.find(what) != std::string_view::npos; }

// Splits off a leading system message.
std::string take_system(const std::vector<ChatMessage>& messages, size_t& first) {
  first = 0;
  if (!messages.empty() && messages[0].role == "system") {
    first = 1;
    return messages[0].content;
  }
  return {};
}

// User/assistant must alternate starting with user (after the optional system message).
void check_alternation(const std::vector<ChatMessage>& messages, size_t first) {
  for (size_t i = first; i < messages.size(); ++i) {
    const bool want_user = (i - first) % 2 == 0;
    if ((messages[i].role == "user") != want_user || messages[i].role == "system")
      template_error("conversation roles must alternate user/assistant/user/assistant/...");
  }
}

std::string render_chatml(const std::vector<ChatMessage>& m, std::string_view tmpl) {
  std::string out;
  // Qwen2.5's template puts a default system prompt in front when the conversation has none.
  constexpr std::string_view kQwenDefault = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  if ((m.empty() || m[0].role != "system") && contains(tmpl, kQwenDefault))
    out += "<|im_start|>system\n" + std::string(kQwenDefault) + "<|im_end|>\n";
  for (const ChatMessage& msg : m) out += "<|im_start|>" + msg.role + "\n" + msg.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

std::string render_llama3(const std::vector<ChatMessage>& m, std::string_view tmpl, const std::string& bos) {
  std::string out = bos;
  auto turn = [&](const std::string& role, const std::string& content) {
    out += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + trim(content) + "<|eot_id|>";
  };
  if (contains(tmpl, "Cutting Knowledge Date")) {
    // Llama 3.1+: the system turn is always there, dated as the template's default.
    size_t first = 0;
    const std::string system = take_system(m, first);
    out += "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul "
           "2024\n\n" + trim(system) + "<|eot_id|>";
    for (size_t i = first; i < m.size(); ++i) turn(m[i].role, m[i].content);
  } else {
    for (const ChatMessage& msg : m) turn(msg.role, msg.content);
  }
  return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string render_llama2(const std::vector<ChatMessage>& m, const std::string& bos) {
  size_t first = 0;
  const std::string system = take_system(m, first);
  check_alternation(m, first);
  std::string out;
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "user") {
      std::string content = trim(m[i].content);
      if (i == first && !system.empty()) content = "<<SYS>>\n" + trim(system) + "\n<</SYS>>\n\n" + content;
      out += bos + "[INST] " + content + " [/INST]";
    } else {
      out += " " + trim(m[i].content) + " </s>";
    }
  }
  return out;
}

std::string render_mistral(const std::vector<ChatMessage>& m, const std::string& bos) {
  size_t first = 0;
  const bool has_system = !m.empty() && m[0].role == "system";
  const std::string system = take_system(m, first);
  check_alternation(m, first);
  std::string out = bos;
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "user") {
      // The system message goes in front of the user message that ends the conversation (Mistral's template).
      if (i + 1 == m.size() && has_system)
        out += "[INST]" + system + "\n\n" + m[i].content + "[/INST]";
      else
        out += "[INST]" + m[i].content + "[/INST]";
    } else {
      out += m[i].content + "</s>";
    }
  }
  return out;
}

std::string render_phi3(const std::vector<ChatMessage>& m) {
  std::string out;
  for (const ChatMessage& msg : m) {
    if (msg.role == "system" && msg.content.empty()) continue;
    out += "<|" + msg.role + "|>\n" + msg.content + "<|end|>\n";
  }
  return out + "<|assistant|>\n";
}

std::string render_gemma(const std::vector<ChatMessage>& m, const std::string& bos) {
  if (!m.empty() && m[0].role == "system") template_error("the system role is not supported by this model");
  check_alternation(m, 0);
  std::string out = bos;
  for (const ChatMessage& msg : m)
    out += "<start_of_turn>" + std::string(msg.role == "assistant" ? "model" : "user") + "\n" + trim(msg.content) +
           "<end_of_turn>\n";
  return out + "<start_of_turn>model\n";
}

std::string render_fallback(const std::vector<ChatMessage>& m, const std::string& bos) {
  std::string out = bos;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i) out += "\n";
    out += m[i].content;
  }
  return out;
}

}  // namespace

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::Fallback: return "fallback";
    case ChatFamily::ChatML: return "chatml";
    case ChatFamily::Llama3: return "llama3";
    case ChatFamily::Llama2: return "llama2";
    case ChatFamily::Mistral: return "mistral";
    case ChatFamily::Phi3: return "phi3";
    case ChatFamily::Gemma: return "gemma";
  }
  return "fallback";
}

ChatFamily detect_chat_family(std::string_view t) {
  if (t.empty()) return ChatFamily::Fallback;
  if (contains(t, "<|im_start|>")) return ChatFamily::ChatML;
  if (contains(t, "<|start_header_id|>")) return ChatFamily::Llama3;
  if (contains(t, "<start_of_turn>")) return ChatFamily::Gemma;
  if (contains(t, "<|user|>") && contains(t, "<|end|>")) return ChatFamily::Phi3;
  if (contains(t, "[INST]") && contains(t, "<<SYS>>")) return ChatFamily::Llama2;
  if (contains(t, "[INST]")) return ChatFamily::Mistral;
  return ChatFamily::Fallback;
}

ChatTemplate::ChatTemplate(ChatFamily family, std::string template_text, std::string bos_text)
    : family_(family), template_text_(std::move(template_text)), bos_text_(std::move(bos_text)) {}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  if (messages.empty()) template_error("no messages");
  switch (family_) {
    case ChatFamily::ChatML: return render_chatml(messages, template_text_);
    case ChatFamily::Llama3: return render_llama3(messages, template_text_, bos_text_);
    case ChatFamily::Llama2: return render_llama2(messages, bos_text_);
    case ChatFamily::Mistral: return render_mistral(messages, bos_text_);
    case ChatFamily::Phi3: return render_phi3(messages);
    case ChatFamily::Gemma: return render_gemma(messages, bos_text_);
    case ChatFamily::Fallback: return render_fallback(messages, bos_text_);
  }
  return render_fallback(messages, bos_text_);
}

SpecialTokenEncoder::SpecialTokenEncoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const TokenKind kind = vocab.kinds[i];
    if ((kind == TokenKind::Control || kind == TokenKind::UserDefined) && vocab.tokens[i].size() > 1)
      specials_.emplace_back(vocab.tokens[i], int32_t(i));
  }
  std::sort(specials_.begin(), specials_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::vector<int32_t> SpecialTokenEncoder::encode(std::string_view text, bool add_bos) const {
  const Tokenizer& tokenizer = tokenizer_;
  const Vocab& vocab = tokenizer.vocab();
  std::vector<int32_t> out;
  const bool starts_with_bos =
      vocab.bos >= 0 && text.substr(0, vocab.tokens[size_t(vocab.bos)].size()) == vocab.tokens[size_t(vocab.bos)];
  if (add_bos && vocab.add_bos && vocab.bos >= 0 && !starts_with_bos) out.push_back(vocab.bos);
  size_t pos = 0, plain_start = 0;
  auto flush_plain = [&](size_t end) {
    if (end > plain_start) {
      const std::vector<int32_t> ids = tokenizer.encode(text.substr(plain_start, end - plain_start), false);
      out.insert(out.end(), ids.begin(), ids.end());
    }
  };
  while (pos < text.size()) {
    bool matched = false;
    if (text[pos] == '<' || text[pos] == '[') {
      for (const auto& [piece, id] : specials_) {
        if (text.compare(pos, piece.size(), piece) == 0) {
          flush_plain(pos);
          out.push_back(id);
          pos += piece.size();
          plain_start = pos;
          matched = true;
          break;
        }
      }
    }
    if (!matched) ++pos;
  }
  flush_plain(text.size());
  return out;
}

}  // namespace tessera::server
