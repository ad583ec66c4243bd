// Tool calls in a chat reply: the syntax a model family writes them in (Qwen/Hermes `<tool_call>` JSON, Llama
// 3.1's bare JSON object), and an incremental parser that splits the reply's text into content and OpenAI tool
// calls as it streams. The same parser reads a whole reply, so streamed deltas and a complete response always
// agree. The parser expects the exact layout the tool grammar (structured_output.h) generates.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

enum class ToolCallSyntax {
  Hermes,  // <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, several separated by "\n" (Qwen)
  Llama3,  // {"name": "f", "parameters": {...}} as the whole reply (Llama 3.1 / 3.2 JSON tool calling)
};

struct ToolCallFormat {
  ToolCallSyntax syntax = ToolCallSyntax::Hermes;

  // From the chat template's source: Llama's when it asks for {"name": ..., "parameters": ...}, otherwise Hermes
  // (Qwen's templates, and the default for models without a template).
  static ToolCallFormat for_template(std::string_view source);
  const char* name() const { return syntax == ToolCallSyntax::Hermes ? "hermes" : "llama3"; }

  // What starts a call, and whether it counts only at the very start of the reply.
  std::string_view trigger() const { return syntax == ToolCallSyntax::Hermes ? "<tool_call>" : "{"; }
  bool trigger_at_start() const { return syntax == ToolCallSyntax::Llama3; }
  // A call of `name`: opening (trigger included), then the arguments JSON, then closing.
  std::string opening(std::string_view name) const;
  std::string_view closing() const { return syntax == ToolCallSyntax::Hermes ? "}\n</tool_call>" : "}"; }
  // Between two calls of one reply; empty when the syntax has one call per reply.
  std::string_view separator() const { return syntax == ToolCallSyntax::Hermes ? "\n" : ""; }
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text as the model wrote it
  bool complete = false;  // its closing was read (a reply cut by max_tokens may leave the last one open)
};

// A piece of a streamed reply: content text, or a part of tool call `call` (its id and name come with its first
// delta, then the arguments in fragments).
struct ReplyDelta {
  std::string content;
  int32_t call = -1;
  std::string id = {}, name = {};
  std::string arguments = {};
};

class ToolCallParser {
 public:
  // `id_prefix`: tool call ids are id_prefix + "_" + index (unique within the response).
  ToolCallParser(ToolCallFormat format, std::string id_prefix);

  // Appends to `out` what `text` (the next piece of the reply) completes. Text that might still become the start
  // of a call, and blanks that might stand between calls, are held back.
  void feed(std::string_view text, std::vector<ReplyDelta>& out);
  // The end of the reply: what was held back (content) goes out; an unfinished call stays incomplete.
  void finish(std::vector<ReplyDelta>& out);

  const std::vector<ToolCall>& calls() const { return calls_; }
  const std::string& id_prefix() const { return id_prefix_; }
  const std::string& content() const { return content_; }  // every content delta so far, concatenated

 private:
  enum class State { Content, Header, Name, AfterName, Arguments, Closing, Plain };
  void emit_content(std::string_view text, std::vector<ReplyDelta>& out);
  // Gives up on a call whose text does not have the expected layout: what was read of it becomes content.
  void abandon_call(std::vector<ReplyDelta>& out);

  ToolCallFormat format_;
  std::string id_prefix_;
  State state_ = State::Content;
  bool at_start_ = true;     // nothing of the reply read yet
  std::string pending_;      // Content: held back; other states: the call's text read so far in this state
  std::string blanks_;       // Content: trailing blanks held back (dropped before a call)
  std::string call_text_;    // the current call's text from its trigger on (for abandon_call)
  size_t matched_ = 0;       // Header / AfterName / Closing: bytes of the expected text matched
  int depth_ = 0;            // Arguments: JSON nesting
  bool in_string_ = false, escaped_ = false;
  std::vector<ToolCall> calls_;
  std::string content_;
};

// OpenAI's message.tool_calls array, and one streamed delta's "tool_calls" array.
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);
nlohmann::json tool_call_delta_json(const ReplyDelta& delta);

}  // namespace tessera::server
