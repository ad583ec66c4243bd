// Chat prompts through the chat-template interpreter, and special-token-aware encoding.
#include "server/chat_template.h"

#include "server/errors.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

chat::Value message_list(const std::vector<ChatMessage>& messages) {
  std::vector<chat::Value> out;
  out.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    chat::Dict d;
    d.set("role", m.role);
    d.set("content", m.content);
    // Only when present: Llama's template tests `'tool_calls' in message`.
    if (!m.tool_calls.is_null()) d.set("tool_calls", chat::from_json(m.tool_calls));
    if (!m.tool_call_id.empty()) d.set("tool_call_id", m.tool_call_id);
    out.push_back(chat::Value::dict(std::move(d)));
  }
  return chat::Value::list(std::move(out));
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, const Vocab& vocab) {
  if (!source.empty()) template_ = chat::Template::parse(source);
  const std::pair<const char*, int32_t> specials[] = {
      {"bos_token", vocab.bos}, {"eos_token", vocab.eos}, {"unk_token", vocab.unk}, {"pad_token", vocab.pad}};
  for (const auto& [name, id] : specials)
    if (id >= 0) special_tokens_.set(name, vocab.tokens[size_t(id)]);
  if (vocab.bos >= 0 && vocab.add_bos) fallback_bos_ = vocab.tokens[size_t(vocab.bos)];
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const nlohmann::json& kwargs,
                                 const nlohmann::ordered_json* tools) const {
  if (!template_) {
    std::string out = fallback_bos_;
    for (size_t i = 0; i < messages.size(); ++i) out += (i ? "\n" : "") + messages[i].content;
    return out;
  }
  try {
    // The request's variables first, so that the server's own (set after them) always win.
    chat::Dict context;
    if (kwargs.is_object())
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) context.set(it.key(), chat::from_json(it.value()));
    for (const auto& [name, value] : special_tokens_.entries()) context.set(name, value);
    context.set("messages", message_list(messages));
    context.set("tools", tools ? chat::from_json(*tools) : chat::Value::none());
    context.set("documents", chat::Value::none());
    context.set("add_generation_prompt", true);
    return template_->render(context);
  } catch (const Error& e) {
    // raise_exception() gives the template's own words; other failures name the template line.
    throw ApiException(ErrorCode::TemplateError, e.what(), "messages");
  }
}

SpecialTokenEncoder::SpecialTokenEncoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const TokenKind kind = vocab.kinds[i];
    const std::string& piece = vocab.tokens[i];
    if ((kind == TokenKind::Control || kind == TokenKind::UserDefined) && piece.size() > 1 &&
        (piece[0] == '<' || piece[0] == '['))
      specials_.add(piece, int32_t(i), /*control=*/false);
  }
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
    const SpecialTokenTrie::Match match = specials_.longest_match(text, pos, /*with_control=*/true);
    if (match.id < 0) {
      ++pos;
      continue;
    }
    flush_plain(pos);
    out.push_back(match.id);
    pos += match.length;
    plain_start = pos;
  }
  flush_plain(text.size());
  return out;
}

}  // namespace tessera::server
