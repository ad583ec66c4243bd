// Structured-output request fields, and their grammars.
#include "server/structured_output.h"

#include <algorithm>
#include <optional>

#include "grammar/compile.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_error.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/body_fields.h"
#include "server/errors.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kMaxTools = 128;

using body_fields::bad;
using body_fields::field;

// OpenAI's rule for function and schema names: ^[a-zA-Z0-9_-]{1,64}$ (the tool-call parser relies on it: a name
// never needs escaping inside the JSON string it is written in).
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

void parse_response_format(const ordered_json& v, StructuredRequest& s) {
  if (!v.is_object()) bad("response_format", "must be an object");
  const ordered_json* type = field(v, "type");
  if (!type || !type->is_string()) bad("response_format", "needs a string 'type' (text, json_object or json_schema)");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    s.format = OutputFormat::JsonObject;
    return;
  }
  if (t != "json_schema") bad("response_format", "type '" + t + "' is not supported (text, json_object, json_schema)");
  const ordered_json* js = field(v, "json_schema");
  if (!js || !js->is_object()) bad("response_format.json_schema", "must be an object with a 'schema'");
  if (const ordered_json* name = field(*js, "name"); name && (!name->is_string() || !valid_name(name->get<std::string>())))
    bad("response_format.json_schema.name", "must be 1 to 64 letters, digits, '_' or '-'");
  if (const ordered_json* strict = field(*js, "strict"); strict && !strict->is_boolean())
    bad("response_format.json_schema.strict", "must be a boolean");
  const ordered_json* schema = field(*js, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad("response_format.json_schema.schema", "must be a JSON Schema (an object)");
  s.format = OutputFormat::JsonSchema;
  s.schema = *schema;
}

void parse_tools(const ordered_json& v, StructuredRequest& s) {
  if (!v.is_array()) bad("tools", "must be an array");
  if (v.size() > kMaxTools) bad("tools", "may hold at most " + std::to_string(kMaxTools) + " tools");
  for (size_t i = 0; i < v.size(); ++i) {
    const ordered_json& t = v[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) bad(at, "must be an object");
    const ordered_json* type = field(t, "type");
    if (!type || *type != "function") bad(at + ".type", "must be 'function'");
    const ordered_json* f = field(t, "function");
    if (!f || !f->is_object()) bad(at + ".function", "must be an object");
    const ordered_json* name = field(*f, "name");
    if (!name || !name->is_string() || !valid_name(name->get<std::string>()))
      bad(at + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
    if (const ordered_json* d = field(*f, "description"); d && !d->is_string())
      bad(at + ".function.description", "must be a string");
    if (const ordered_json* strict = field(*f, "strict"); strict && !strict->is_boolean())
      bad(at + ".function.strict", "must be a boolean");
    ToolFunction fn;
    fn.name = name->get<std::string>();
    for (const ToolFunction& other : s.functions)
      if (other.name == fn.name) bad(at + ".function.name", "'" + fn.name + "' is defined twice");
    if (const ordered_json* p = field(*f, "parameters")) {
      const ordered_json* ptype = p->is_object() ? field(*p, "type") : nullptr;
      if (!p->is_object() || (ptype && *ptype != "object"))
        bad(at + ".function.parameters", "must be a JSON Schema of type 'object'");
      fn.parameters = *p;
      if (!ptype) fn.parameters["type"] = "object";
    } else {
      fn.parameters = {{"type", "object"}, {"properties", ordered_json::object()}};
    }
    s.functions.push_back(std::move(fn));
  }
  s.tools = v;
}

void parse_tool_choice(const ordered_json& v, StructuredRequest& s) {
  if (v.is_string()) {
    const std::string c = v.get<std::string>();
    if (c == "none") s.tool_choice = ToolChoice::None;
    else if (c == "auto") s.tool_choice = ToolChoice::Auto;
    else if (c == "required") s.tool_choice = ToolChoice::Required;
    else bad("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    return;
  }
  const ordered_json* f = v.is_object() ? field(v, "function") : nullptr;
  const ordered_json* name = f && f->is_object() ? field(*f, "name") : nullptr;
  if (!name || !name->is_string() || (field(v, "type") && *field(v, "type") != "function"))
    bad("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  s.tool_choice = ToolChoice::Named;
  s.named_function = name->get<std::string>();
}

}  // namespace

std::string StructuredRequest::key() const {
  ordered_json k = {{"format", int(format)}, {"schema", schema}, {"source", source}, {"choice", int(tool_choice)},
                    {"named", named_function}, {"parallel", parallel_tool_calls}};
  ordered_json fns = ordered_json::array();
  for (const ToolFunction& f : functions) fns.push_back({f.name, f.parameters});
  k["functions"] = std::move(fns);
  return k.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

StructuredRequest parse_structured_request(std::string_view text, const json& body, bool chat) {
  StructuredRequest s;
  static constexpr const char* kFields[] = {"response_format", "regex", "grammar", "tools", "tool_choice",
                                            "parallel_tool_calls"};
  if (!body.is_object() ||
      std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) {
        const auto it = body.find(f);
        return it != body.end() && !it->is_null();
      }))
    return s;
  ordered_json b;
  try {
    b = ordered_json::parse(text.begin(), text.end());
  } catch (const ordered_json::exception& e) {
    throw ApiException(ErrorCode::InvalidJson, std::string("could not parse the JSON body: ") + e.what());
  }
  int n_formats = 0;
  if (const ordered_json* v = field(b, "response_format")) {
    parse_response_format(*v, s);
    n_formats += s.format != OutputFormat::Text;
  }
  for (const auto& [name, kind] : {std::pair{"regex", OutputFormat::Regex}, std::pair{"grammar", OutputFormat::Grammar}}) {
    if (const ordered_json* v = field(b, name)) {
      if (!v->is_string() || v->get_ref<const std::string&>().empty()) bad(name, "must be a non-empty string");
      s.format = kind;
      s.source = v->get<std::string>();
      ++n_formats;
    }
  }
  if (n_formats > 1) bad("response_format", "'response_format', 'regex' and 'grammar' are exclusive: give one");
  const ordered_json* tools = field(b, "tools");
  if (!chat && (tools || field(b, "tool_choice"))) bad("tools", "are only supported on /v1/chat/completions");
  if (tools) parse_tools(*tools, s);
  s.tool_choice = s.functions.empty() ? ToolChoice::None : ToolChoice::Auto;
  if (const ordered_json* v = field(b, "tool_choice")) {
    parse_tool_choice(*v, s);
    if (s.tool_choice != ToolChoice::None && s.functions.empty())
      bad("tool_choice", "is only allowed when 'tools' are given");
    if (s.tool_choice == ToolChoice::Named &&
        std::none_of(s.functions.begin(), s.functions.end(),
                     [&](const ToolFunction& f) { return f.name == s.named_function; }))
      bad("tool_choice", "names the function '" + s.named_function + "', which is not among 'tools'");
  }
  if (const ordered_json* v = field(b, "parallel_tool_calls")) {
    if (!v->is_boolean()) bad("parallel_tool_calls", "must be a boolean");
    s.parallel_tool_calls = v->get<bool>();
  }
  return s;
}

namespace {

// The grammar of `s`; GrammarError messages are prefixed with the field they concern.
std::shared_ptr<const grammar::Grammar> compile_request(const StructuredRequest& s, const ToolCallFormat& format) {
  using namespace grammar;
  GrammarIR ir;
  std::string param = s.format == OutputFormat::Regex     ? "regex"
                      : s.format == OutputFormat::Grammar ? "grammar"
                      : s.format == OutputFormat::Text    ? "tools"
                                                          : "response_format";
  try {
    std::optional<ExprId> response;
    // GBNF first: its rule names are its own; the JSON builder's rules then take fresh names beside them.
    if (s.format == OutputFormat::Grammar) {
      parse_gbnf(s.source, ir);
      response = ir.ref(ir.root);
    }
    JsonGrammarBuilder json(ir);
    if (s.format == OutputFormat::Regex) response = parse_regex(s.source, ir);
    if (s.format == OutputFormat::JsonObject) response = json.any_object();
    if (s.format == OutputFormat::JsonSchema) response = json.schema(s.schema);
    std::optional<ExprId> calls;
    if (s.tools_active()) {
      param = "tools";
      std::vector<ExprId> alts;
      for (size_t i = 0; i < s.functions.size(); ++i) {
        const ToolFunction& f = s.functions[i];
        if (s.tool_choice == ToolChoice::Named && f.name != s.named_function) continue;
        ExprId args;
        try {
          args = json.schema(f.parameters);
        } catch (const GrammarError& e) {
          grammar_fail("function '{}' parameters: {}", f.name, e.what());
        }
        alts.push_back(ir.seq({ir.literal(format.opening(f.name)), args, ir.literal(format.closing())}));
      }
      const int32_t call = ir.new_rule("tool-call");
      ir.define(call, ir.alt(std::move(alts)));
      calls = ir.ref(call);
      if (s.parallel_tool_calls && !format.separator().empty())
        calls = ir.seq({*calls, ir.repeat(ir.seq({ir.literal(format.separator()), ir.ref(call)}), 0, kUnbounded)});
    }
    ExprId body;
    if (!calls) {
      body = *response;
    } else if (!response || s.tool_choice != ToolChoice::Auto) {
      body = *calls;  // required / named, or auto with free text before the call (trigger mode)
    } else {
      body = ir.alt({*response, *calls});  // auto with a response format: the answer or calls
    }
    const int32_t root = ir.new_rule("root");
    ir.define(root, body);
    ir.root = root;
    return std::make_shared<const Grammar>(compile(ir));
  } catch (const GrammarError& e) {
    bad(param, std::string("cannot be used: ") + e.what());
  }
}

}  // namespace

StructuredOutput::StructuredOutput(ToolCallFormat format, uint64_t cache_bytes) : format_(format), cache_(cache_bytes) {}

std::shared_ptr<const grammar::Constraint> StructuredOutput::constraint(const StructuredRequest& request) {
  if (!request.constrained()) return nullptr;
  auto c = std::make_shared<grammar::Constraint>();
  c->grammar = cache_.get(std::string(format_.name()) + request.key(), [&] { return compile_request(request, format_); });
  if (request.tools_active() && request.tool_choice == ToolChoice::Auto && request.format == OutputFormat::Text) {
    c->trigger = std::string(format_.trigger());
    c->trigger_at_start = format_.trigger_at_start();
  }
  return c;
}

}  // namespace tessera::server
