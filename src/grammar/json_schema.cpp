// Translating JSON Schema keywords into grammar expressions.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "grammar/grammar_error.h"
#include "grammar/integer_range.h"
#include "grammar/json_formats.h"
#include "grammar/regex.h"

namespace tessera::grammar {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kAnnotations[] = {"title",    "description", "default",   "examples", "$comment",
                                             "deprecated", "readOnly",  "writeOnly", "$schema",  "$id",
                                             "$defs",    "definitions"};
constexpr std::string_view kObjectKeys[] = {"properties", "required", "additionalProperties"};
constexpr std::string_view kArrayKeys[] = {"items", "minItems", "maxItems"};
constexpr std::string_view kStringKeys[] = {"pattern", "format", "minLength", "maxLength"};
constexpr std::string_view kNumericKeys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
constexpr std::string_view kCombinators[] = {"type", "enum", "const", "anyOf", "allOf", "$ref"};
constexpr std::string_view kTypes[] = {"object", "array", "string", "integer", "number", "boolean", "null"};

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view key) {
  return std::find(std::begin(set), std::end(set), key) != std::end(set);
}

bool is_annotation(const std::string& key, const ordered_json& value) {
  // uniqueItems: false asks nothing.
  return in(kAnnotations, key) || (key == "uniqueItems" && value.is_boolean() && !value.get<bool>());
}

std::string child(const std::string& path, std::string_view key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return path + "/" + escaped;
}

// The keywords in `s` that constrain (neither annotations nor `allowed`).
std::vector<std::string> constraining_keys(const ordered_json& s, std::initializer_list<std::string_view> allowed) {
  std::vector<std::string> out;
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (is_annotation(it.key(), it.value())) continue;
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    out.push_back(it.key());
  }
  return out;
}

bool matches_type(const ordered_json& v, std::string_view type) {
  if (type == "string") return v.is_string();
  if (type == "integer")
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

int32_t read_count(const ordered_json& v, const std::string& key, const std::string& path, int32_t limit) {
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    grammar_fail("'{}' at {} must be a non-negative integer", key, path);
  const double d = v.get<double>();
  if (d < 0) grammar_fail("'{}' at {} must be a non-negative integer", key, path);
  if (d > limit) grammar_fail("'{}' at {} is {}; at most {} is supported", key, path, v.dump(), limit);
  return int32_t(d);
}

}  // namespace

JsonGrammarBuilder::JsonGrammarBuilder(GrammarIR& ir, JsonSchemaLimits limits) : ir_(ir), limits_(limits) {}

ExprId JsonGrammarBuilder::as_rule(std::string_view name, ExprId body) {
  const int32_t r = ir_.new_rule(name);
  ir_.define(r, body);
  return ir_.ref(r);
}

ExprId JsonGrammarBuilder::ws() {
  if (ws_ >= 0) return ws_;
  // Nothing, one space, or a newline and up to 20 spaces or tabs (pretty-printed JSON).
  const ExprId indent = ir_.repeat(ir_.chars([] {
                                     CodePointSet s = CodePointSet::of(' ');
                                     s.add('\t');
                                     return s;
                                   }()),
                                   0, 20);
  ws_ = ir_.optional(ir_.alt({ir_.literal(" "), ir_.seq({ir_.literal("\n"), indent})}));
  return ws_;
}

ExprId JsonGrammarBuilder::separator() {
  if (separator_ < 0) separator_ = ir_.seq({ws(), ir_.literal(","), ws()});
  return separator_;
}

ExprId JsonGrammarBuilder::string_literal(std::string_view text) {
  return ir_.literal(ordered_json(std::string(text)).dump(-1, ' ', false, ordered_json::error_handler_t::replace));
}

ExprId JsonGrammarBuilder::json_char() {
  if (json_char_ >= 0) return json_char_;
  const ExprId hex = ir_.chars([] {
    CodePointSet s = CodePointSet::range('0', '9');
    s.add('a', 'f');
    s.add('A', 'F');
    return s;
  }());
  // \uXXXX escapes of anything but a surrogate (a lone surrogate is not a character).
  const ExprId not_d = ir_.chars([] {
    CodePointSet s = CodePointSet::range('0', '9');
    s.add('a', 'c');
    s.add('A', 'C');
    s.add('e', 'f');
    s.add('E', 'F');
    return s;
  }());
  const ExprId d = ir_.chars([] {
    CodePointSet s = CodePointSet::of('d');
    s.add('D');
    return s;
  }());
  const ExprId unicode_escape = ir_.seq(
      {ir_.literal("\\u"), ir_.alt({ir_.seq({not_d, ir_.repeat(hex, 3, 3)}),
                                    ir_.seq({d, ir_.chars(CodePointSet::range('0', '7')), ir_.repeat(hex, 2, 2)})})});
  json_char_ = ir_.alt({ir_.json_chars(CodePointSet::all()), unicode_escape, ir_.literal("\\/")});
  return json_char_;
}

ExprId JsonGrammarBuilder::plain_string() {
  if (string_rule_ < 0) {
    string_rule_ = ir_.new_rule("json-string");
    ir_.define(string_rule_,
               ir_.seq({ir_.literal("\""), ir_.repeat(json_char(), 0, kUnbounded), ir_.literal("\"")}));
    ir_.set_shared(string_rule_);
  }
  return ir_.ref(string_rule_);
}

ExprId JsonGrammarBuilder::bounded_string(int32_t min, int32_t max) {
  // One rule per bound pair, created with a fresh name: a rule of the same name (a GBNF grammar's, in the same
  // IR) is never picked up.
  int32_t& r = bounded_string_rules_[{min, max}];
  if (r == 0) {
    r = ir_.new_rule("json-string-" + std::to_string(min) + "-" + (max == kUnbounded ? "inf" : std::to_string(max))) + 1;
    ir_.define(r - 1, ir_.seq({ir_.literal("\""), ir_.repeat(json_char(), min, max), ir_.literal("\"")}));
    ir_.set_shared(r - 1);
  }
  return ir_.ref(r - 1);
}

ExprId JsonGrammarBuilder::integer_digits() {
  // 0, or up to 16 digits without a leading zero.
  return ir_.alt({ir_.literal("0"), ir_.seq({ir_.chars(CodePointSet::range('1', '9')),
                                             ir_.repeat(ir_.chars(CodePointSet::range('0', '9')), 0, 15)})});
}

ExprId JsonGrammarBuilder::number() {
  const ExprId digit = ir_.chars(CodePointSet::range('0', '9'));
  const ExprId fraction = ir_.seq({ir_.literal("."), ir_.repeat(digit, 1, 15)});
  CodePointSet e = CodePointSet::of('e');
  e.add('E');
  CodePointSet sign = CodePointSet::of('+');
  sign.add('-');
  const ExprId exponent = ir_.seq({ir_.chars(e), ir_.optional(ir_.chars(sign)), ir_.repeat(digit, 1, 2)});
  return ir_.seq({ir_.optional(ir_.literal("-")), integer_digits(), ir_.optional(fraction), ir_.optional(exponent)});
}

ExprId JsonGrammarBuilder::any_value() {
  if (value_rule_ < 0) {
    value_rule_ = ir_.new_rule("json-value");
    const int32_t array_rule = ir_.new_rule("json-array");
    object_rule_ = ir_.new_rule("json-object");
    const ExprId value = ir_.ref(value_rule_);
    const ExprId member = ir_.seq({plain_string(), ws(), ir_.literal(":"), ws(), value});
    ir_.define(object_rule_,
               ir_.seq({ir_.literal("{"), ws(),
                        ir_.optional(ir_.seq({member, ir_.repeat(ir_.seq({separator(), member}), 0, kUnbounded)})),
                        ws(), ir_.literal("}")}));
    ir_.define(array_rule,
               ir_.seq({ir_.literal("["), ws(),
                        ir_.optional(ir_.seq({value, ir_.repeat(ir_.seq({separator(), value}), 0, kUnbounded)})),
                        ws(), ir_.literal("]")}));
    ir_.define(value_rule_, ir_.alt({ir_.ref(object_rule_), ir_.ref(array_rule), plain_string(), number(),
                                     ir_.literal("true"), ir_.literal("false"), ir_.literal("null")}));
  }
  return ir_.ref(value_rule_);
}

ExprId JsonGrammarBuilder::any_object() {
  any_value();
  return ir_.ref(object_rule_);
}

ExprId JsonGrammarBuilder::schema(const ordered_json& s) {
  ++document_;
  root_ = &s;
  const ExprId e = value(s, "#", 0);
  root_ = nullptr;
  return e;
}

ExprId JsonGrammarBuilder::value(const ordered_json& s, const std::string& path, int depth) {
  if (depth > limits_.max_depth) grammar_fail("the schema nests deeper than {} levels (at {})", limits_.max_depth, path);
  if (++n_schemas_ > limits_.max_schemas) grammar_fail("the schema has more than {} subschemas", limits_.max_schemas);
  if (s.is_boolean()) {
    if (s.get<bool>()) return any_value();
    grammar_fail("the schema at {} is false: no value matches it", path);
  }
  if (!s.is_object()) grammar_fail("the schema at {} must be an object or a boolean", path);
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& key = it.key();
    if (is_annotation(key, it.value()) || in(kCombinators, key) || in(kObjectKeys, key) || in(kArrayKeys, key) ||
        in(kStringKeys, key) || in(kNumericKeys, key))
      continue;
    grammar_fail("unsupported JSON Schema keyword '{}' at {}", key, path);
  }
  if (const auto ref = s.find("$ref"); ref != s.end()) {
    if (!ref->is_string()) grammar_fail("'$ref' at {} must be a string", path);
    if (const auto others = constraining_keys(s, {"$ref"}); !others.empty())
      grammar_fail("'{}' beside '$ref' at {} is not supported", others[0], path);
    return reference(ref->get<std::string>(), path, depth);
  }
  if (s.contains("enum") || s.contains("const")) return enumeration(s, path);
  if (const auto any = s.find("anyOf"); any != s.end()) {
    if (const auto others = constraining_keys(s, {"anyOf"}); !others.empty())
      grammar_fail("'{}' beside 'anyOf' at {} is not supported", others[0], path);
    if (!any->is_array() || any->empty()) grammar_fail("'anyOf' at {} must be a non-empty array", path);
    std::vector<ExprId> alts;
    for (size_t i = 0; i < any->size(); ++i)
      alts.push_back(value((*any)[i], child(child(path, "anyOf"), std::to_string(i)), depth + 1));
    return ir_.alt(std::move(alts));
  }
  if (const auto all = s.find("allOf"); all != s.end()) {
    if (!all->is_array() || all->size() != 1)
      grammar_fail("'allOf' at {} is only supported with exactly one schema", path);
    if (const auto others = constraining_keys(s, {"allOf"}); !others.empty())
      grammar_fail("'{}' beside 'allOf' at {} is not supported", others[0], path);
    return value((*all)[0], child(child(path, "allOf"), "0"), depth + 1);
  }

  std::vector<std::string> types;
  if (const auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) {
      types.push_back(t->get<std::string>());
    } else if (t->is_array() && !t->empty()) {
      for (const ordered_json& x : *t) {
        if (!x.is_string()) grammar_fail("'type' at {} must be a string or an array of strings", path);
        types.push_back(x.get<std::string>());
      }
    } else {
      grammar_fail("'type' at {} must be a string or a non-empty array of strings", path);
    }
    for (const std::string& type : types)
      if (!in(kTypes, type)) grammar_fail("unknown type '{}' at {}", type, path);
  } else {
    // No type: the keywords say which (the schema accepts any other type, but generating one is enough).
    std::vector<std::string> implied;
    auto any_key = [&](const auto& keys) {
      for (std::string_view k : keys)
        if (s.contains(std::string(k))) return true;
      return false;
    };
    if (any_key(kObjectKeys)) implied.push_back("object");
    if (any_key(kArrayKeys)) implied.push_back("array");
    if (any_key(kStringKeys)) implied.push_back("string");
    if (any_key(kNumericKeys)) implied.push_back("integer");
    if (implied.size() > 1) grammar_fail("the schema at {} mixes keywords of several types; give it a 'type'", path);
    if (implied.empty()) return any_value();
    types = implied;
  }
  std::vector<ExprId> alts;
  for (const std::string& type : types) alts.push_back(typed(type, s, path, depth));
  return ir_.alt(std::move(alts));
}

ExprId JsonGrammarBuilder::typed(const std::string& type, const ordered_json& s, const std::string& path, int depth) {
  if (type == "object") return object(s, path, depth);
  if (type == "array") return array(s, path, depth);
  if (type == "string") return string(s, path);
  if (type == "integer") return integer(s, path);
  if (type == "number") {
    for (std::string_view k : kNumericKeys)
      if (s.contains(std::string(k)))
        grammar_fail("'{}' at {} is only supported for integers (\"type\": \"integer\")", k, path);
    return number();
  }
  if (type == "boolean") return ir_.alt({ir_.literal("true"), ir_.literal("false")});
  return ir_.literal("null");
}

ExprId JsonGrammarBuilder::object(const ordered_json& s, const std::string& path, int depth) {
  struct Property {
    std::string name;
    const ordered_json* schema;  // null: any value (required but not described)
    bool required = false;
  };
  std::vector<Property> props;
  if (const auto p = s.find("properties"); p != s.end()) {
    if (!p->is_object()) grammar_fail("'properties' at {} must be an object", path);
    if (p->size() > limits_.max_properties)
      grammar_fail("the object at {} has {} properties; at most {} are supported", path, p->size(),
                   limits_.max_properties);
    for (auto it = p->begin(); it != p->end(); ++it) props.push_back({it.key(), &it.value(), false});
  }
  if (const auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) grammar_fail("'required' at {} must be an array of strings", path);
    for (const ordered_json& name : *r) {
      if (!name.is_string()) grammar_fail("'required' at {} must be an array of strings", path);
      auto it = std::find_if(props.begin(), props.end(), [&](const Property& x) { return x.name == name; });
      if (it == props.end()) {
        props.push_back({name.get<std::string>(), nullptr, true});
      } else {
        it->required = true;
      }
    }
  }
  bool additional = true;
  if (const auto a = s.find("additionalProperties"); a != s.end()) {
    if (!a->is_boolean())
      grammar_fail("'additionalProperties' at {} is only supported as true or false (not a schema)", path);
    additional = a->get<bool>();
  }
  // A property whose schema is false may not appear: fine while it is optional.
  std::erase_if(props, [&](const Property& p) {
    if (!p.schema || !p.schema->is_boolean() || p.schema->get<bool>()) return false;
    if (p.required) grammar_fail("property '{}' at {} is required but its schema is false", p.name, path);
    return true;
  });
  if (props.empty() && additional) return any_object();

  const std::string props_path = child(path, "properties");
  std::vector<ExprId> members;
  for (const Property& p : props) {
    const ExprId v = p.schema ? value(*p.schema, child(props_path, p.name), depth + 1) : any_value();
    members.push_back(
        ir_.seq({string_literal(p.name), ws(), ir_.literal(":"), ws(), as_rule("property-" + p.name, v)}));
  }
  // Properties in schema order; optional ones may be left out, with commas only between those present:
  // alternatives by which property comes first (a required property cannot be preceded by a missing one's
  // comma, so the first present is at most the first required).
  const size_t n = props.size();
  size_t first_required = n;
  for (size_t i = 0; i < n; ++i)
    if (props[i].required) {
      first_required = i;
      break;
    }
  std::vector<ExprId> firsts;
  for (size_t f = 0; f < n && f <= first_required; ++f) {
    std::vector<ExprId> seq{members[f]};
    for (size_t j = f + 1; j < n; ++j) {
      const ExprId item = ir_.seq({separator(), members[j]});
      seq.push_back(props[j].required ? item : ir_.optional(item));
    }
    firsts.push_back(ir_.seq(std::move(seq)));
  }
  ExprId body = n == 0 ? ir_.empty() : ir_.alt(std::move(firsts));
  if (first_required == n) body = ir_.optional(body);
  return ir_.seq({ir_.literal("{"), ws(), body, ws(), ir_.literal("}")});
}

ExprId JsonGrammarBuilder::array(const ordered_json& s, const std::string& path, int depth) {
  int32_t min = 0, max = kUnbounded;
  if (const auto v = s.find("minItems"); v != s.end()) min = read_count(*v, "minItems", path, limits_.max_items);
  if (const auto v = s.find("maxItems"); v != s.end()) max = read_count(*v, "maxItems", path, limits_.max_items);
  if (max != kUnbounded && max < min) grammar_fail("'maxItems' is below 'minItems' at {}", path);
  ExprId item = -1;
  if (const auto items = s.find("items"); items != s.end()) {
    if (items->is_boolean() && !items->get<bool>()) {
      if (min > 0) grammar_fail("'items' is false at {} but 'minItems' asks for {}", path, min);
      max = 0;
    } else {
      item = value(*items, child(path, "items"), depth + 1);
    }
  } else {
    item = any_value();
  }
  const ExprId open = ir_.seq({ir_.literal("["), ws()});
  const ExprId close = ir_.seq({ws(), ir_.literal("]")});
  if (max == 0) return ir_.seq({open, close});
  item = as_rule("item", item);
  const ExprId rest = ir_.repeat(ir_.seq({separator(), item}), std::max(min - 1, 0),
                                 max == kUnbounded ? kUnbounded : max - 1);
  ExprId body = ir_.seq({item, rest});
  if (min == 0) body = ir_.optional(body);
  return ir_.seq({open, body, close});
}

ExprId JsonGrammarBuilder::string(const ordered_json& s, const std::string& path) {
  const auto pattern = s.find("pattern");
  const auto format = s.find("format");
  const auto min_length = s.find("minLength");
  const auto max_length = s.find("maxLength");
  const bool has_length = min_length != s.end() || max_length != s.end();
  if (int(pattern != s.end()) + int(format != s.end()) + int(has_length) > 1)
    grammar_fail("'pattern', 'format' and 'minLength'/'maxLength' at {} cannot be combined", path);
  std::string_view source;
  if (pattern != s.end()) {
    if (!pattern->is_string()) grammar_fail("'pattern' at {} must be a string", path);
    source = pattern->get_ref<const std::string&>();
  } else if (format != s.end()) {
    if (!format->is_string()) grammar_fail("'format' at {} must be a string", path);
    source = json_format_pattern(format->get<std::string>());
    if (source.empty()) grammar_fail("unsupported string format '{}' at {}", format->get<std::string>(), path);
  }
  if (pattern != s.end() || format != s.end()) {
    RegexOptions options;
    options.json_string = true;
    ExprId body;
    try {
      body = parse_regex(source, ir_, options);
    } catch (const GrammarError& e) {
      grammar_fail("'pattern' at {}: {}", path, e.what());
    }
    return ir_.seq({ir_.literal("\""), body, ir_.literal("\"")});
  }
  if (has_length) {
    const int32_t min = min_length != s.end() ? read_count(*min_length, "minLength", path, limits_.max_length) : 0;
    const int32_t max =
        max_length != s.end() ? read_count(*max_length, "maxLength", path, limits_.max_length) : kUnbounded;
    if (max != kUnbounded && max < min) grammar_fail("'maxLength' is below 'minLength' at {}", path);
    return bounded_string(min, max);
  }
  return plain_string();
}

ExprId JsonGrammarBuilder::integer(const ordered_json& s, const std::string& path) {
  std::optional<int64_t> lo, hi;
  // Draft 4 spells exclusiveness as booleans beside minimum/maximum; later drafts as numbers.
  const bool exclusive_min_flag = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                                  s["exclusiveMinimum"].get<bool>();
  const bool exclusive_max_flag = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                                  s["exclusiveMaximum"].get<bool>();
  auto bound = [&](const char* key, bool lower, bool exclusive) {
    const auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return;
    if (!it->is_number()) grammar_fail("'{}' at {} must be a number", key, path);
    const double v = it->get<double>();
    if (!std::isfinite(v)) grammar_fail("'{}' at {} must be finite", key, path);
    const double clamped = std::clamp(v, -1e18, 1e18);
    int64_t b;
    if (lower) {
      b = int64_t(std::ceil(clamped));
      if (exclusive && double(b) == clamped) ++b;
      lo = lo ? std::max(*lo, b) : b;
    } else {
      b = int64_t(std::floor(clamped));
      if (exclusive && double(b) == clamped) --b;
      hi = hi ? std::min(*hi, b) : b;
    }
  };
  bound("minimum", true, exclusive_min_flag);
  bound("exclusiveMinimum", true, true);
  bound("maximum", false, exclusive_max_flag);
  bound("exclusiveMaximum", false, true);
  if (!lo && !hi) return ir_.seq({ir_.optional(ir_.literal("-")), integer_digits()});
  try {
    return integer_range(ir_, lo, hi);
  } catch (const GrammarError& e) {
    grammar_fail("the integer bounds at {} leave no value: {}", path, e.what());
  }
}

ExprId JsonGrammarBuilder::enumeration(const ordered_json& s, const std::string& path) {
  if (const auto others = constraining_keys(s, {"enum", "const", "type"}); !others.empty())
    grammar_fail("'{}' beside 'enum'/'const' at {} is not supported", others[0], path);
  std::vector<const ordered_json*> values;
  if (const auto c = s.find("const"); c != s.end()) values.push_back(&*c);
  if (const auto e = s.find("enum"); e != s.end()) {
    if (s.contains("const")) grammar_fail("'enum' beside 'const' at {} is not supported", path);
    if (!e->is_array() || e->empty()) grammar_fail("'enum' at {} must be a non-empty array", path);
    if (e->size() > limits_.max_enum)
      grammar_fail("'enum' at {} has {} values; at most {} are supported", path, e->size(), limits_.max_enum);
    for (const ordered_json& v : *e) values.push_back(&v);
  }
  std::vector<std::string> types;
  if (const auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array())
      for (const ordered_json& x : *t)
        if (x.is_string()) types.push_back(x.get<std::string>());
  }
  std::vector<ExprId> alts;
  std::set<std::string> seen;
  for (const ordered_json* v : values) {
    if (!types.empty() &&
        std::none_of(types.begin(), types.end(), [&](const std::string& t) { return matches_type(*v, t); }))
      continue;
    const std::string text = v->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    if (seen.insert(text).second) alts.push_back(ir_.literal(text));
  }
  if (alts.empty()) grammar_fail("no value of 'enum'/'const' at {} has the schema's type", path);
  return ir_.alt(std::move(alts));
}

ExprId JsonGrammarBuilder::reference(const std::string& ref, const std::string& path, int depth) {
  if (ref.empty() || ref[0] != '#')
    grammar_fail("'$ref' '{}' at {}: only references within the schema (\"#...\") are supported", ref, path);
  const std::string key = std::to_string(document_) + ref;
  if (const auto it = ref_rules_.find(key); it != ref_rules_.end()) return ir_.ref(it->second);
  const ordered_json* target = nullptr;
  try {
    target = &root_->at(ordered_json::json_pointer(ref.substr(1)));
  } catch (const ordered_json::exception&) {
    grammar_fail("'$ref' '{}' at {} does not resolve within the schema", ref, path);
  }
  // The rule exists before its body is built, so a schema that refers to itself (recursion) finds it.
  const int32_t rule = ir_.new_rule("ref" + ref.substr(1));
  ref_rules_.emplace(key, rule);
  ir_.define(rule, value(*target, ref, depth + 1));
  return ir_.ref(rule);
}

}  // namespace tessera::grammar
