// JSON Schema -> grammar: the JSON texts a schema accepts, as grammar expressions. The subset OpenAI's strict
// structured outputs document, plus a little more:
//
//   type (one or a list), enum, const, anyOf, allOf with one member, $ref (to "#" or any JSON pointer in the
//   same document, with recursion) with $defs / definitions; objects: properties, required,
//   additionalProperties; arrays: items, minItems, maxItems; strings: pattern, format (date-time, date,
//   time, duration, email, hostname, ipv4, ipv6, uuid), minLength, maxLength; integers: minimum, maximum,
//   exclusiveMinimum, exclusiveMaximum. Annotations (title, description, default, examples, ...) are ignored.
//
// Every other keyword is an error naming it and where it is, never silently ignored. Output is generated
// in the schema's property order, without properties the schema does not list (additionalProperties true or
// absent allows them, but none are generated), with whitespace between tokens bounded (at most a space, or a
// newline and 20 spaces or tabs) so that a model cannot loop on blanks; integers up to 16 digits, fractions up to
// 15, exponents up to 2. Everything generated validates against the schema.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "grammar/grammar_ir.h"

namespace tessera::grammar {

struct JsonSchemaLimits {
  int max_depth = 64;            // schemas nested in schemas
  size_t max_schemas = 20000;    // subschemas compiled (over all calls on one builder)
  int32_t max_items = 256;       // minItems / maxItems
  int32_t max_length = 1000;     // minLength / maxLength
  size_t max_enum = 1024;        // enum values
  size_t max_properties = 512;   // properties of one object
};

class JsonGrammarBuilder {
 public:
  explicit JsonGrammarBuilder(GrammarIR& ir, JsonSchemaLimits limits = {});

  // JSON text valid against `schema` (a JSON Schema document: its $refs resolve within it). Throws
  // GrammarError: "unsupported JSON Schema keyword 'multipleOf' at #/properties/price".
  ExprId schema(const nlohmann::ordered_json& schema);
  ExprId any_value();   // any JSON value
  ExprId any_object();  // any JSON object (OpenAI's json_object mode)
  ExprId ws();          // the whitespace allowed between two tokens
  // `text` as a JSON string literal ("..." with JSON's escapes).
  ExprId string_literal(std::string_view text);

 private:
  ExprId value(const nlohmann::ordered_json& s, const std::string& path, int depth);
  ExprId typed(const std::string& type, const nlohmann::ordered_json& s, const std::string& path, int depth);
  ExprId object(const nlohmann::ordered_json& s, const std::string& path, int depth);
  ExprId array(const nlohmann::ordered_json& s, const std::string& path, int depth);
  ExprId string(const nlohmann::ordered_json& s, const std::string& path);
  ExprId integer(const nlohmann::ordered_json& s, const std::string& path);
  ExprId enumeration(const nlohmann::ordered_json& s, const std::string& path);
  ExprId reference(const std::string& ref, const std::string& path, int depth);
  // A rule holding `body` (the compiler copies it into its users when small or used once).
  ExprId as_rule(std::string_view name, ExprId body);
  ExprId separator();  // ws "," ws
  ExprId json_char();  // one character of a string, plain or escaped
  ExprId plain_string();
  ExprId bounded_string(int32_t min, int32_t max);
  ExprId number();
  ExprId integer_digits();

  GrammarIR& ir_;
  JsonSchemaLimits limits_;
  size_t n_schemas_ = 0;
  int document_ = 0;                              // which schema() call: refs resolve per document
  const nlohmann::ordered_json* root_ = nullptr;  // the document being compiled
  std::map<std::string, int32_t> ref_rules_;      // document + pointer -> rule
  std::map<std::pair<int32_t, int32_t>, int32_t> bounded_string_rules_;  // (min, max) -> rule + 1
  int32_t string_rule_ = -1, value_rule_ = -1, object_rule_ = -1;
  ExprId ws_ = -1, separator_ = -1, json_char_ = -1;  // built once, shared (expressions are immutable)
};

}  // namespace tessera::grammar
