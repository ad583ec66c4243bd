// The tool-call syntaxes and the streaming parser of replies.
#include "server/tool_calls.h"

namespace tessera::server {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The fixed text between the trigger and the name, and between the name and the arguments.
std::string_view header(const ToolCallFormat& f) {
  return f.syntax == ToolCallSyntax::Hermes ? "\n{\"name\": \"" : "\"name\": \"";
}
// After the name's closing quote (which the name's state reads).
std::string_view after_name(const ToolCallFormat& f) {
  return f.syntax == ToolCallSyntax::Hermes ? ", \"arguments\": " : ", \"parameters\": ";
}

}  // namespace

ToolCallFormat ToolCallFormat::for_template(std::string_view source) {
  ToolCallFormat f;
  if (source.find("<tool_call>") == std::string_view::npos && source.find("\"parameters\": ") != std::string_view::npos)
    f.syntax = ToolCallSyntax::Llama3;
  return f;
}

std::string ToolCallFormat::opening(std::string_view name) const {
  std::string s(trigger());
  s += header(*this);
  s += name;
  s += '"';
  s += after_name(*this);
  return s;
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::string id_prefix)
    : format_(format), id_prefix_(std::move(id_prefix)) {}

void ToolCallParser::emit_content(std::string_view text, std::vector<ReplyDelta>& out) {
  // Trailing blanks wait: before a call (or at the end, after calls) they are dropped.
  size_t body_end = text.size();
  while (body_end > 0 && is_blank(text[body_end - 1])) --body_end;
  if (body_end == 0) {
    blanks_ += text;
    return;
  }
  std::string piece = std::move(blanks_);
  piece += text.substr(0, body_end);
  blanks_ = std::string(text.substr(body_end));
  content_ += piece;
  if (!out.empty() && out.back().call < 0) {
    out.back().content += piece;
  } else {
    out.push_back({piece});
  }
}

void ToolCallParser::abandon_call(std::vector<ReplyDelta>& out) {
  state_ = State::Plain;
  const std::string text = std::move(call_text_);
  call_text_.clear();
  emit_content(text, out);
}

void ToolCallParser::feed(std::string_view text, std::vector<ReplyDelta>& out) {
  const std::string_view trigger = format_.trigger();
  while (!text.empty()) {
    switch (state_) {
      case State::Plain:
        emit_content(text, out);
        return;
      case State::Content: {
        if (format_.trigger_at_start()) {
          // The call is the whole reply or there is none.
          state_ = at_start_ && text.starts_with(trigger) ? State::Header : State::Plain;
          at_start_ = false;
          if (state_ == State::Header) {
            call_text_ = std::string(trigger);
            matched_ = 0;
            text.remove_prefix(trigger.size());
          }
          continue;
        }
        at_start_ = false;
        pending_ += text;
        text = {};
        const size_t at = pending_.find(trigger);
        if (at != std::string::npos) {
          emit_content(std::string_view(pending_).substr(0, at), out);
          blanks_.clear();
          const std::string rest = pending_.substr(at + trigger.size());
          pending_.clear();
          call_text_ = std::string(trigger);
          matched_ = 0;
          state_ = State::Header;
          feed(rest, out);
          return;
        }
        // Hold back the longest tail that could still grow into the trigger.
        size_t keep = std::min(pending_.size(), trigger.size() - 1);
        while (keep > 0 && !trigger.starts_with(std::string_view(pending_).substr(pending_.size() - keep))) --keep;
        emit_content(std::string_view(pending_).substr(0, pending_.size() - keep), out);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::Header:
      case State::AfterName:
      case State::Closing: {
        const std::string_view expected = state_ == State::Header      ? header(format_)
                                          : state_ == State::AfterName ? after_name(format_)
                                                                       : format_.closing();
        const char c = text[0];
        if (c != expected[matched_]) {
          if (state_ == State::Header) {
            abandon_call(out);
          } else {
            state_ = State::Plain;  // the call was announced: it stays incomplete
          }
          continue;
        }
        text.remove_prefix(1);
        if (state_ == State::Header) call_text_ += c;
        if (++matched_ < expected.size()) continue;
        matched_ = 0;
        if (state_ == State::Header) {
          state_ = State::Name;
          pending_.clear();
        } else if (state_ == State::AfterName) {
          state_ = State::Arguments;
          depth_ = 0;
          in_string_ = escaped_ = false;
        } else {
          calls_.back().complete = true;
          state_ = format_.separator().empty() ? State::Plain : State::Content;
        }
        continue;
      }
      case State::Name: {
        const char c = text[0];
        if (c == '"' && !pending_.empty()) {
          text.remove_prefix(1);
          ToolCall call;
          call.id = id_prefix_ + "_" + std::to_string(calls_.size());
          call.name = std::move(pending_);
          pending_.clear();
          call_text_.clear();
          ReplyDelta d;
          d.call = int32_t(calls_.size());
          d.id = call.id;
          d.name = call.name;
          out.push_back(std::move(d));
          calls_.push_back(std::move(call));
          state_ = State::AfterName;
          matched_ = 0;
        } else if (is_name_char(c) && pending_.size() < 64) {
          pending_ += c;
          call_text_ += c;
          text.remove_prefix(1);
        } else {
          abandon_call(out);
        }
        continue;
      }
      case State::Arguments: {
        size_t n = 0;
        bool done = false;
        for (; n < text.size() && !done; ++n) {
          const char c = text[n];
          if (in_string_) {
            if (escaped_) {
              escaped_ = false;
            } else if (c == '\\') {
              escaped_ = true;
            } else if (c == '"') {
              in_string_ = false;
            }
          } else if (c == '"') {
            in_string_ = true;
          } else if (c == '{' || c == '[') {
            ++depth_;
          } else if (c == '}' || c == ']') {
            done = --depth_ == 0;
          } else if (depth_ == 0 && !is_blank(c)) {
            state_ = State::Plain;  // not an object: the call stays incomplete
            break;
          }
        }
        const std::string_view fragment = text.substr(0, n);
        text.remove_prefix(n);
        if (state_ == State::Plain) continue;
        calls_.back().arguments += fragment;
        const int32_t index = int32_t(calls_.size() - 1);
        if (!out.empty() && out.back().call == index) {
          out.back().arguments += fragment;
        } else {
          ReplyDelta d;
          d.call = index;
          d.arguments = std::string(fragment);
          out.push_back(std::move(d));
        }
        if (done) state_ = State::Closing;
        continue;
      }
    }
  }
}

void ToolCallParser::finish(std::vector<ReplyDelta>& out) {
  if (state_ == State::Header || state_ == State::Name) abandon_call(out);
  if (!pending_.empty() && state_ == State::Content) {
    const std::string held = std::move(pending_);
    pending_.clear();
    emit_content(held, out);
  }
  if (calls_.empty() && !blanks_.empty()) {
    content_ += blanks_;
    if (!out.empty() && out.back().call < 0) {
      out.back().content += blanks_;
    } else {
      out.push_back({blanks_});
    }
  }
  blanks_.clear();
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

nlohmann::json tool_call_delta_json(const ReplyDelta& d) {
  nlohmann::json call = {{"index", d.call}};
  if (!d.id.empty()) {
    call["id"] = d.id;
    call["type"] = "function";
    call["function"] = {{"name", d.name}, {"arguments", d.arguments}};
  } else {
    call["function"] = {{"arguments", d.arguments}};
  }
  return nlohmann::json::array({std::move(call)});
}

}  // namespace tessera::server
