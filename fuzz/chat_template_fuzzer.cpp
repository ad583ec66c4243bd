// libFuzzer target for the chat-template interpreter (src/chat): a template from a model file rendered over a
// conversation from an HTTP client. Any input must either render or fail with the interpreter's own errors, within
// its limits (parser nesting, value nesting, string and output sizes, the work budget); a crash, a sanitizer
// report, a stack overflow, a timeout (-timeout) or a memory blow-up (-rss_limit_mb / -malloc_limit_mb) is a bug.
//
// Input: TEMPLATE [\0 JSON]. Without a 0 byte the whole input is the template, rendered over a small fixed
// conversation (so template-only seeds reach the message loops); after it, a JSON object
//   {"messages": [{"role", "content", "tool_calls", "tool_call_id"}...], "tools": [...], "kwargs": {...},
//    "bos_token": "<s>", "eos_token": "</s>", "unk_token": ..., "pad_token": ...}
// builds the context the way server::ChatTemplate::render does (src/server/chat_template.cpp, mirrored below:
// the server library itself needs the engine): kwargs first, then the special tokens, messages (tool_calls and
// tool_call_id only when present), tools (None when absent), documents None, add_generation_prompt true.
// A special token given as null is one the vocabulary lacks (absent from the context). JSON that does not
// parse gives the server's variables only (no messages, tools None). strftime_now reads a fixed clock, and the
// work budget is a 64th of the server's (see kMaxWork). Messages may have any role here (the server's request
// parsing allows system, user, assistant and tool).
//
// Invariants checked:
//   - Template::parse throws only SyntaxError (line and column >= 1); a template that is not valid UTF-8 never
//     parses.
//   - Template::render throws only RenderError (a plain one names its line: "chat template line L: ..."), or
//     RaisedError for the template's own raise_exception().
//   - Rendering the same parsed template twice with the same context gives the same text, or the same error
//     (the AST is shared and immutable; nothing of one render leaks into the next).
//   - The output is valid UTF-8 (every string the interpreter holds is: templates are checked when parsed,
//     JSON strings are valid, string operations work on code points) and at most 64 MiB (the output limit).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/errors.h"
#include "chat/template.h"
#include "chat/value.h"
#include "core/error.h"
#include "core/utf8.h"

namespace {

using nlohmann::ordered_json;
using tessera::chat::Dict;
using tessera::chat::RenderError;
using tessera::chat::RaisedError;
using tessera::chat::SyntaxError;
using tessera::chat::Template;
using tessera::chat::Value;

constexpr size_t kMaxOutputBytes = size_t(64) << 20;  // interpreter.cpp's limit on the rendered prompt
// The server renders with kDefaultMaxWork; a sanitizer build runs some 30 times slower, so a template that spends
// the whole budget would pass -timeout. The fuzzer gives each render 1/64 of it (a second or two under ASan): the
// same mechanism, and what a render does with fewer units it does with more.
constexpr uint64_t kMaxWork = tessera::chat::kDefaultMaxWork / 64;

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "chat_template_fuzzer: invariant violated: %s%s%s\n", what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::abort();
}

void require(bool ok, const char* what, const std::string& detail = {}) {
  if (!ok) violated(what, detail);
}

const char* kDefaultConversation = R"({
  "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "<think>greet</think>Hello", "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
               {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "c1"}, {"role": "user", "content": "é😀"}],
  "tools": [{"type": "function", "function": {"name": "f", "description": "d",
             "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
})";

// server::ChatTemplate's message_list(): role and content always; tool_calls and tool_call_id only when set.
Value message_list(const ordered_json& messages) {
  std::vector<Value> out;
  if (!messages.is_array()) return Value::list(std::move(out));
  for (const ordered_json& m : messages) {
    if (!m.is_object()) continue;
    Dict d;
    const auto role = m.find("role");
    const auto content = m.find("content");
    d.set("role", role != m.end() && role->is_string() ? role->get<std::string>() : std::string("user"));
    d.set("content", content != m.end() && content->is_string() ? content->get<std::string>() : std::string());
    if (const auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array())
      d.set("tool_calls", tessera::chat::from_json(*calls));
    if (const auto id = m.find("tool_call_id"); id != m.end() && id->is_string() && !id->get<std::string>().empty())
      d.set("tool_call_id", id->get<std::string>());
    out.push_back(Value::dict(std::move(d)));
  }
  return Value::list(std::move(out));
}

// server::ChatTemplate::render's context. Throws tessera::Error for JSON the interpreter refuses (too deep, an
// integer beyond int64): the server turns that into a 400 like any template error.
Dict build_context(const ordered_json& doc) {
  Dict context;
  if (const auto kwargs = doc.find("kwargs"); kwargs != doc.end() && kwargs->is_object()) {
    // The server's kwargs are an unordered nlohmann::json (keys sorted): the same order here.
    const nlohmann::json sorted = nlohmann::json::parse(kwargs->dump());
    for (auto it = sorted.begin(); it != sorted.end(); ++it) context.set(it.key(), tessera::chat::from_json(it.value()));
  }
  for (const auto& [name, fallback] : {std::pair<const char*, const char*>{"bos_token", "<s>"},
                                       {"eos_token", "</s>"}, {"unk_token", nullptr}, {"pad_token", nullptr}}) {
    const auto it = doc.find(name);
    if (it != doc.end() && it->is_string()) {
      context.set(name, it->get<std::string>());
    } else if (it == doc.end() && fallback) {
      context.set(name, fallback);
    }
  }
  context.set("messages", message_list(doc.contains("messages") ? doc["messages"] : ordered_json()));
  const auto tools = doc.find("tools");
  context.set("tools", tools != doc.end() && !tools->is_null() ? tessera::chat::from_json(*tools) : Value::none());
  context.set("documents", Value::none());
  context.set("add_generation_prompt", true);
  return context;
}

// One render's result: the text, or the error's kind and message.
struct Outcome {
  enum Kind { Text, Raised, Failed } kind = Text;
  std::string value;
  bool operator==(const Outcome& o) const { return kind == o.kind && value == o.value; }
};

Outcome render(const Template& t, const Dict& context, const tessera::chat::RenderOptions& options) {
  try {
    return {Outcome::Text, t.render(context, options)};
  } catch (const RaisedError& e) {
    return {Outcome::Raised, e.what()};
  } catch (const RenderError& e) {
    const std::string message = e.what();
    require(e.line() >= 1, "a render error without a template line", message);
    require(message.rfind("chat template line ", 0) == 0, "a render error that does not name its line", message);
    return {Outcome::Failed, message};
  } catch (const tessera::Error& e) {
    violated("render threw a tessera::Error that is not a RenderError", e.what());
  } catch (const std::exception& e) {
    violated("render threw a foreign exception", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);

  ordered_json doc = ordered_json::object();
  if (split == std::string_view::npos) {
    static const ordered_json conversation = ordered_json::parse(kDefaultConversation);
    doc = conversation;
  } else {
    doc = ordered_json::parse(input.substr(split + 1), nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) doc = ordered_json::object();
  }

  std::optional<Template> parsed;
  try {
    parsed = Template::parse(source);
  } catch (const SyntaxError& e) {
    require(e.line() >= 1 && e.column() >= 1, "a syntax error without a position", e.what());
    return 0;
  } catch (const tessera::Error& e) {
    violated("parse threw a tessera::Error that is not a SyntaxError", e.what());
  } catch (const std::exception& e) {
    violated("parse threw a foreign exception", e.what());
  }
  require(tessera::utf8::is_valid(source), "a template that is not valid UTF-8 parsed");

  Dict context;
  try {
    context = build_context(doc);
  } catch (const tessera::Error&) {
    return 0;  // JSON the interpreter refuses (too deep, an integer beyond int64): a 400 in the server
  }

  tessera::chat::RenderOptions options;
  options.now = [] { return std::chrono::system_clock::from_time_t(1721952000); };  // both renders agree
  options.max_work = kMaxWork;
  const Outcome first = render(*parsed, context, options);
  if (first.kind == Outcome::Text) {
    require(first.value.size() <= kMaxOutputBytes, "output beyond the output limit");
    require(tessera::utf8::is_valid(first.value), "output that is not valid UTF-8");
  }
  const Outcome second = render(*parsed, context, options);
  require(first == second, "two renders of one parsed template differ",
          first.value.substr(0, 200) + " | " + second.value.substr(0, 200));
  return 0;
}
