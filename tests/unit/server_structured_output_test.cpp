// Structured output on the server side: the request fields read and refused with a 400 naming the field and the
// reason; constraints compiled once per source and cached; tool calls that the tool grammar generates parsed back
// into complete calls with valid arguments, the same whether the reply arrives whole or in pieces; tools and
// the tool-call syntax following the chat template (tools reaching templates: server_chat_template_test.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "grammar_test_util.h"
#include "json_schema_check.h"
#include "server/errors.h"
#include "server/openai_json.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"
#include "test_paths.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

StructuredRequest parse(const std::string& body, bool chat = true) {
  return parse_structured_request(body, json::parse(body), chat);
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["b", "a"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now"}}
])";

std::string with_tools(const std::string& extra) { return std::string(R"({"tools": )") + kTools + extra + "}"; }

TEST(ServerStructuredOutput, ReadsTheFields) {
  StructuredRequest s = parse(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
      "schema": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}}}})");
  EXPECT_EQ(s.format, OutputFormat::JsonSchema);
  EXPECT_EQ(s.schema["properties"].begin().key(), "z") << "property order is kept";
  EXPECT_EQ(parse(R"({"response_format": {"type": "json_object"}})").format, OutputFormat::JsonObject);
  EXPECT_EQ(parse(R"({"response_format": {"type": "text"}})").format, OutputFormat::Text);
  EXPECT_EQ(parse(R"({"regex": "[a-z]+"})", false).format, OutputFormat::Regex);
  EXPECT_EQ(parse(R"({"grammar": "root ::= \"x\""})", false).source, "root ::= \"x\"");
  s = parse(with_tools(""));
  EXPECT_EQ(s.tool_choice, ToolChoice::Auto);
  ASSERT_EQ(s.functions.size(), 3u);
  EXPECT_EQ(s.functions[2].parameters["type"], "object");
  EXPECT_TRUE(s.tools_active());
  ASSERT_NE(s.template_tools(), nullptr);
  EXPECT_EQ(parse(with_tools(R"(, "tool_choice": "none")")).template_tools(), nullptr);
  s = parse(with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "add"}}, "parallel_tool_calls": false)"));
  EXPECT_EQ(s.tool_choice, ToolChoice::Named);
  EXPECT_EQ(s.named_function, "add");
  EXPECT_FALSE(s.parallel_tool_calls);
  EXPECT_FALSE(parse(R"({"messages": []})").constrained());
}

TEST(ServerStructuredOutput, BadFieldsAre400sNamingThem) {
  const std::pair<std::string, std::pair<const char*, const char*>> cases[] = {
      {R"({"response_format": "json"})", {"response_format", "must be an object"}},
      {R"({"response_format": {"type": "yaml"}})", {"response_format", "type 'yaml' is not supported"}},
      {R"({"response_format": {"type": "json_schema"}})", {"response_format.json_schema", "must be an object"}},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}})",
       {"response_format.json_schema.name", "letters"}},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}})",
       {"response_format.json_schema.schema", "JSON Schema"}},
      {R"({"regex": 7})", {"regex", "non-empty string"}},
      {R"({"regex": "a", "grammar": "root ::= \"a\""})", {"response_format", "exclusive"}},
      {R"({"response_format": {"type": "json_object"}, "regex": "a"})", {"response_format", "exclusive"}},
      {R"({"tools": {}})", {"tools", "must be an array"}},
      {R"({"tools": [{"type": "function", "function": {"name": "bad name"}}]})", {"tools[0].function.name", "letters"}},
      {R"({"tools": [{"type": "retrieval"}]})", {"tools[0].type", "must be 'function'"}},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]})",
       {"tools[0].function.parameters", "type 'object'"}},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})",
       {"tools[1].function.name", "defined twice"}},
      {R"({"tool_choice": "required"})", {"tool_choice", "only allowed when 'tools'"}},
      {with_tools(R"(, "tool_choice": "sometimes")"), {"tool_choice", "must be 'none'"}},
      {with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"), {"tool_choice", "'nope'"}},
      {with_tools(R"(, "parallel_tool_calls": "yes")"), {"parallel_tool_calls", "boolean"}},
  };
  for (const auto& [body, expected] : cases) {
    try {
      parse(body);
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiException& e) {
      EXPECT_EQ(http_status(e.error().code), 400) << body;
      EXPECT_EQ(e.error().param, expected.first) << body;
      EXPECT_NE(e.error().message.find(expected.second), std::string::npos) << body << ": " << e.error().message;
    }
  }
  EXPECT_THROW(parse(with_tools(""), false), ApiException) << "tools only on chat completions";
}

TEST(ServerStructuredOutput, RefusedGrammarsAre400sWithTheReason) {
  StructuredOutput out{ToolCallFormat{}};
  const std::pair<std::string, std::pair<const char*, const char*>> cases[] = {
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
          "properties": {"p": {"type": "number", "multipleOf": 3}}}}}})",
       {"response_format", "unsupported JSON Schema keyword 'multipleOf' at #/properties/p"}},
      {R"({"regex": "(a"})", {"regex", "missing ')'"}},
      {R"({"regex": "(a|b)*a(a|b){30}"})", {"regex", "too complex"}},
      {R"({"grammar": "root ::= root \"x\""})", {"grammar", "left-recursive"}},
      {R"({"grammar": "root ::= \"x\"\nroot ::= \"y\""})", {"grammar", "defined twice"}},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"x": {"not": {}}}}}}]})",
       {"tools", "function 'f' parameters: unsupported JSON Schema keyword 'not'"}},
  };
  for (const auto& [body, expected] : cases) {
    try {
      out.constraint(parse(body));
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiException& e) {
      EXPECT_EQ(http_status(e.error().code), 400) << body;
      EXPECT_EQ(e.error().param, expected.first) << body;
      EXPECT_NE(e.error().message.find(expected.second), std::string::npos) << body << ": " << e.error().message;
    }
  }
}

TEST(ServerStructuredOutput, ConstraintsAreCompiledOncePerSource) {
  StructuredOutput out{ToolCallFormat{}};
  const std::string schema = R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
      {"type": "object", "properties": {"a": {"type": "integer"}}}}}})";
  const auto first = out.constraint(parse(schema));
  const auto second = out.constraint(parse(schema));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->grammar, second->grammar) << "the same compiled grammar";
  EXPECT_EQ(out.cache_stats().misses, 1u);
  EXPECT_EQ(out.cache_stats().hits, 1u);
  // Another property order is another schema (its output differs).
  const std::string reordered = R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
      {"properties": {"a": {"type": "integer"}}, "type": "object"}}}})";
  EXPECT_NE(out.constraint(parse(reordered))->grammar, first->grammar);
  EXPECT_EQ(out.constraint(parse(R"({"messages": []})")), nullptr);
  // Tool choice auto without a format: free text until the opening tag.
  const auto tools = out.constraint(parse(with_tools("")));
  EXPECT_EQ(tools->trigger, "<tool_call>");
  EXPECT_TRUE(out.constraint(parse(with_tools(R"(, "tool_choice": "required")")))->trigger.empty());
}

// Random walks through the tool grammar parse back into complete calls of the given tools, with arguments
// that parse and validate against the function's parameters, and the same result in any number of pieces.
void expect_tool_walks_parse(ToolCallFormat format, const std::string& extra, bool parallel) {
  StructuredOutput out{format};
  const StructuredRequest request = parse(with_tools(extra));
  const auto constraint = out.constraint(request);
  const grammar::testing::SmallVocab v;
  std::mt19937 rng(17);
  int complete = 0;
  for (int i = 0; i < 40; ++i) {
    const grammar::testing::Walk w = grammar::testing::random_walk(constraint->grammar, v, rng, 3000, 0.3);
    if (!w.complete) continue;
    ++complete;
    ToolCallParser whole(format, "call_x");
    std::vector<ReplyDelta> deltas;
    whole.feed(w.text, deltas);
    whole.finish(deltas);
    ASSERT_FALSE(whole.calls().empty()) << w.text;
    EXPECT_TRUE(parallel || whole.calls().size() == 1) << w.text;
    EXPECT_EQ(whole.content(), "") << w.text;
    for (const ToolCall& call : whole.calls()) {
      EXPECT_TRUE(call.complete) << w.text;
      const auto fn = std::find_if(request.functions.begin(), request.functions.end(),
                                   [&](const ToolFunction& f) { return f.name == call.name; });
      ASSERT_NE(fn, request.functions.end()) << call.name;
      ordered_json args;
      ASSERT_NO_THROW(args = ordered_json::parse(call.arguments)) << call.arguments;
      EXPECT_EQ(tessera::testing::SchemaCheck(fn->parameters).check(args), "") << call.arguments;
    }
    // In pieces of random sizes: the deltas add up to the same calls.
    ToolCallParser pieces(format, "call_x");
    std::vector<ReplyDelta> streamed;
    for (size_t at = 0; at < w.text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 7)(rng);
      pieces.feed(std::string_view(w.text).substr(at, n), streamed);
      at += n;
    }
    pieces.finish(streamed);
    std::vector<std::string> names, arguments;
    for (const ReplyDelta& d : streamed) {
      ASSERT_GE(d.call, 0) << "no content expected";
      if (size_t(d.call) >= arguments.size()) {
        ASSERT_EQ(size_t(d.call), arguments.size()) << "calls are announced in order";
        ASSERT_FALSE(d.name.empty()) << "the first delta of a call names it";
        names.push_back(d.name);
        arguments.emplace_back();
      }
      arguments[size_t(d.call)] += d.arguments;
    }
    ASSERT_EQ(names.size(), whole.calls().size());
    for (size_t k = 0; k < names.size(); ++k) {
      EXPECT_EQ(names[k], whole.calls()[k].name);
      EXPECT_EQ(arguments[k], whole.calls()[k].arguments);
    }
  }
  EXPECT_GT(complete, 15);
}

TEST(ServerStructuredOutput, ToolGrammarWalksParseIntoValidCalls) {
  expect_tool_walks_parse(ToolCallFormat{ToolCallSyntax::Hermes}, R"(, "tool_choice": "required")", true);
  expect_tool_walks_parse(ToolCallFormat{ToolCallSyntax::Hermes}, R"(, "tool_choice": "required", "parallel_tool_calls": false)", false);
  expect_tool_walks_parse(ToolCallFormat{ToolCallSyntax::Llama3}, R"(, "tool_choice": "required")", false);
  expect_tool_walks_parse(ToolCallFormat{ToolCallSyntax::Hermes},
                          R"(, "tool_choice": {"type": "function", "function": {"name": "add"}})", true);
}

TEST(ServerStructuredOutput, ParserSplitsContentAndCalls) {
  const std::string reply =
      "Let me check <the> weather.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a}\\\"{\"}}"
      "\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n";
  for (size_t piece : {size_t(1), size_t(3), reply.size()}) {
    ToolCallParser p(ToolCallFormat{}, "call_r");
    std::vector<ReplyDelta> deltas;
    for (size_t at = 0; at < reply.size(); at += piece) p.feed(std::string_view(reply).substr(at, piece), deltas);
    p.finish(deltas);
    EXPECT_EQ(p.content(), "Let me check <the> weather.");
    ASSERT_EQ(p.calls().size(), 2u);
    EXPECT_EQ(p.calls()[0].name, "get_weather");
    EXPECT_EQ(p.calls()[0].arguments, "{\"city\": \"a}\\\"{\"}");
    EXPECT_EQ(p.calls()[0].id, "call_r_0");
    EXPECT_EQ(p.calls()[1].arguments, "{}");
    EXPECT_TRUE(p.calls()[1].complete);
  }
  // Plain replies come through whole, a partial tag and trailing blanks included.
  for (const std::string text : {"no calls here <tool", "a < b and c <tool_cal\n\n", "  ", "<tool_call>\n{\"x\": 1}"}) {
    ToolCallParser p(ToolCallFormat{}, "c");
    std::vector<ReplyDelta> deltas;
    p.feed(text, deltas);
    p.finish(deltas);
    EXPECT_EQ(p.content(), text);
    EXPECT_TRUE(p.calls().empty());
  }
  // Cut by max_tokens inside the arguments: the call stays incomplete.
  ToolCallParser cut(ToolCallFormat{}, "c");
  std::vector<ReplyDelta> deltas;
  cut.feed("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1", deltas);
  cut.finish(deltas);
  ASSERT_EQ(cut.calls().size(), 1u);
  EXPECT_FALSE(cut.calls()[0].complete);
  EXPECT_EQ(cut.calls()[0].arguments, "{\"a\": 1");
  // Llama 3: the whole reply is the call, or plain text.
  ToolCallParser llama(ToolCallFormat{ToolCallSyntax::Llama3}, "c");
  llama.feed("{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", deltas);
  llama.finish(deltas);
  ASSERT_EQ(llama.calls().size(), 1u);
  EXPECT_EQ(llama.calls()[0].arguments, "{\"a\": 1, \"b\": 2}");
  ToolCallParser text(ToolCallFormat{ToolCallSyntax::Llama3}, "c");
  text.feed("The answer is {\"name\": 3}", deltas);
  text.finish(deltas);
  EXPECT_TRUE(text.calls().empty());
  EXPECT_EQ(text.content(), "The answer is {\"name\": 3}");
}

TEST(ServerStructuredOutput, FormatFollowsTheTemplate) {
  auto read = [](const std::string& name) {
    std::ifstream in(testing::shared_path("chat-templates/" + name), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return name.ends_with(".json") ? json::parse(ss.str())["chat_template"].get<std::string>() : ss.str();
  };
  EXPECT_EQ(ToolCallFormat::for_template(read("qwen3-tokenizer_config.json")).syntax, ToolCallSyntax::Hermes);
  EXPECT_EQ(ToolCallFormat::for_template(read("Qwen-Qwen2.5-7B-Instruct.jinja")).syntax, ToolCallSyntax::Hermes);
  EXPECT_EQ(ToolCallFormat::for_template(read("meta-llama-Llama-3.1-8B-Instruct.jinja")).syntax, ToolCallSyntax::Llama3);
  EXPECT_EQ(ToolCallFormat::for_template("").syntax, ToolCallSyntax::Hermes);
}

}  // namespace
}  // namespace tessera::server
