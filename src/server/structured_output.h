// Structured output and tool calling for the OpenAI API: the request fields (response_format, the `regex` and
// `grammar` extensions, tools, tool_choice, parallel_tool_calls) read and checked, and turned into the
// grammar::Constraint the engine decodes under. Compiled grammars are cached by their source, so a schema or a
// tool set is compiled once however many requests use it. Every problem with these fields is a 400 naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "server/tool_calls.h"

namespace tessera::server {

enum class OutputFormat { Text, JsonObject, JsonSchema, Regex, Grammar };
enum class ToolChoice { None, Auto, Required, Named };

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema of type object
};

struct StructuredRequest {
  OutputFormat format = OutputFormat::Text;
  nlohmann::ordered_json schema;  // JsonSchema: the schema, properties in the order sent
  std::string source;             // Regex: the pattern; Grammar: GBNF text
  nlohmann::ordered_json tools;   // chat: the tools array as sent (for the chat template); null without tools
  std::vector<ToolFunction> functions;
  ToolChoice tool_choice = ToolChoice::None;
  std::string named_function;     // ToolChoice::Named
  bool parallel_tool_calls = true;

  // Something constrains the output, or tool calls are to be parsed out of it.
  bool constrained() const { return format != OutputFormat::Text || tools_active(); }
  bool tools_active() const { return tool_choice != ToolChoice::None && !functions.empty(); }
  // What the chat template gets as `tools` (null when none, or tool_choice is "none").
  const nlohmann::ordered_json* template_tools() const { return tools_active() ? &tools : nullptr; }
  // The whole specification as one string: equal strings, equal constraints (the grammar cache's key).
  std::string key() const;
};

// Reads the structured-output fields of a request body. `body` is the parsed body; `text` its source, parsed again
// with key order kept when one of these fields is there (properties are generated in schema order). Throws
// ApiException (400, naming the field). `chat`: tools are only accepted on chat completions.
StructuredRequest parse_structured_request(std::string_view text, const nlohmann::json& body, bool chat);

class StructuredOutput {
 public:
  StructuredOutput(ToolCallFormat format, uint64_t cache_bytes = 64ull << 20);

  // The constraint for `request`, null when nothing constrains it (no format and tool_choice none). Throws
  // ApiException (400) with the reason when the schema, regex or grammar is refused.
  std::shared_ptr<const grammar::Constraint> constraint(const StructuredRequest& request);

  const ToolCallFormat& tool_format() const { return format_; }
  grammar::GrammarCacheStats cache_stats() const { return cache_.stats(); }

 private:
  ToolCallFormat format_;
  grammar::GrammarCache cache_;
};

}  // namespace tessera::server
