// JSON Schema -> grammar: random walks through the mask always give documents that parse and that an
// independent validator accepts, for nested objects, optional properties, arrays with bounds, enums, anyOf,
// recursion through $ref, formats, patterns and integer ranges; hand-picked texts are accepted or refused; every
// unsupported keyword is refused by name; hostile schemas end in an error, not in a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "grammar/grammar_error.h"
#include "grammar/integer_range.h"
#include "grammar_test_util.h"
#include "json_schema_check.h"
#include "time_bound.h"

namespace tessera::grammar {
namespace {

using nlohmann::ordered_json;

const char* kSchemas[] = {
    // Nested objects, optional properties in order.
    R"({"type": "object", "properties": {
         "name": {"type": "string", "maxLength": 6},
         "address": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 4},
                                                      "zip": {"type": "integer", "minimum": 1000, "maximum": 99999}},
                     "required": ["city"], "additionalProperties": false},
         "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
         "ok": {"type": "boolean"}},
       "required": ["address"], "additionalProperties": false})",
    // Everything optional.
    R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "null"}, "c": {"type": "number"}},
       "additionalProperties": false})",
    // anyOf and type lists.
    R"({"type": "array", "minItems": 2, "maxItems": 4, "items": {"anyOf": [
         {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 3},
         {"type": ["string", "null"], "pattern": "^[a-c]+$"},
         {"type": "object", "properties": {"k": {"const": [1, "x", null]}}, "required": ["k"]}]}})",
    // Recursion through $ref.
    R"({"$defs": {"tree": {"type": "object", "properties": {
         "label": {"type": "string", "enum": ["a", "b", "\"quoted\"", "é"]},
         "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}},
       "required": ["label"], "additionalProperties": false}}, "$ref": "#/$defs/tree"})",
    // Formats.
    R"({"type": "object", "properties": {"d": {"type": "string", "format": "date"},
         "t": {"type": "string", "format": "time"}, "dt": {"type": "string", "format": "date-time"},
         "u": {"type": "string", "format": "uuid"}, "ip": {"type": "string", "format": "ipv4"}},
       "required": ["d", "t", "dt", "u", "ip"], "additionalProperties": false})",
    // Root recursion with "#".
    R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
       "n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n", "next"]})",
};

// 60 random walks; each complete one must parse and pass `check` (an empty string means valid).
template <typename Check>
void expect_walks_valid(const std::shared_ptr<const Grammar>& g, uint32_t seed, const std::string& what,
                        Check&& check) {
  const testing::SmallVocab v;
  std::mt19937 rng(seed);
  int complete = 0;
  for (int i = 0; i < 60; ++i) {
    const testing::Walk w = testing::random_walk(g, v, rng, 2000);
    if (!w.complete) continue;
    ++complete;
    ordered_json doc;
    ASSERT_NO_THROW(doc = ordered_json::parse(w.text)) << w.text;
    EXPECT_EQ(check(doc), "") << w.text << "\n" << what;
  }
  EXPECT_GT(complete, 20) << what;
}

TEST(GrammarJsonSchema, RandomWalksAlwaysValidate) {
  uint32_t seed = 2024;
  for (const char* text : kSchemas) {
    const ordered_json schema = ordered_json::parse(text);
    const tessera::testing::SchemaCheck check(schema);
    expect_walks_valid(testing::schema_grammar(schema), seed++, text,
                       [&](const ordered_json& doc) { return check.check(doc); });
  }
}

TEST(GrammarJsonSchema, GenericJsonObjectWalksParse) {
  expect_walks_valid(testing::json_object_grammar(), 5, "json_object", [](const ordered_json& doc) {
    return doc.is_object() ? std::string() : std::string("not an object");
  });
}

TEST(GrammarJsonSchema, AcceptsAndRefusesTexts) {
  const auto g = testing::schema_grammar(ordered_json::parse(kSchemas[0]));
  const CompiledGrammar& a = g->automaton();
  EXPECT_TRUE(testing::full_match(a, R"({"address": {"city": "Oslo"}})"));
  EXPECT_TRUE(testing::full_match(a, R"({"name":"Jo","address":{"city":"Rome","zip":1234},"tags":[],"ok":true})"));
  EXPECT_TRUE(testing::full_match(a, "{\n  \"address\": {\n    \"city\": \"a\"\n  }\n}"));
  EXPECT_FALSE(testing::full_match(a, R"({"name": "Jo"})"));                                 // required address
  EXPECT_FALSE(testing::full_match(a, R"({"address": {"city": "Oslo"}, "name": "Jo"})"));    // out of order
  EXPECT_FALSE(testing::full_match(a, R"({"address": {"city": "Bergen"}})"));                // city too long
  EXPECT_FALSE(testing::full_match(a, R"({"address": {"city": "Oslo", "zip": 999}})"));      // below minimum
  EXPECT_FALSE(testing::full_match(a, R"({"address": {"city": "Oslo"}, "tags": ["red","red","red","red"]})"));
  EXPECT_FALSE(testing::full_match(a, R"({"address": {"city": "Oslo"},})"));
  EXPECT_FALSE(testing::full_match(a, R"( {"address": {"city": "Oslo"}})"));                 // leading blank
  // Whitespace is bounded: at most a newline and 20 blanks between two tokens.
  EXPECT_TRUE(testing::full_match(a, "{\n" + std::string(20, ' ') + "\"address\": {\"city\": \"a\"}}"));
  EXPECT_FALSE(testing::full_match(a, "{\n" + std::string(21, ' ') + "\"address\": {\"city\": \"a\"}}"));
  EXPECT_FALSE(testing::full_match(a, "{  \"address\": {\"city\": \"a\"}}"));
  const auto dates = testing::schema_grammar(ordered_json::parse(R"({"type": "string", "format": "date"})"));
  EXPECT_TRUE(testing::full_match(dates->automaton(), "\"2024-02-29\""));
  EXPECT_TRUE(testing::full_match(dates->automaton(), "\"2000-02-29\""));
  EXPECT_FALSE(testing::full_match(dates->automaton(), "\"1900-02-29\""));
  EXPECT_FALSE(testing::full_match(dates->automaton(), "\"2023-02-29\""));
  EXPECT_FALSE(testing::full_match(dates->automaton(), "\"2023-04-31\""));
}

TEST(GrammarJsonSchema, IntegerRangesAreExact) {
  const std::pair<std::optional<int64_t>, std::optional<int64_t>> ranges[] = {
      {7, 123}, {-120, -7}, {-15, 9}, {0, 0}, {1000, 99999}, {std::nullopt, -3}, {5, std::nullopt}};
  for (const auto& [lo, hi] : ranges) {
    GrammarIR ir;
    const int32_t root = ir.rule("root");
    ir.define(root, integer_range(ir, lo, hi));
    ir.root = root;
    const CompiledGrammar g = compile(ir);
    for (int64_t x = -200000; x <= 200000; x += (x > -300 && x < 300) ? 1 : 997) {
      const bool inside = (!lo || x >= *lo) && (!hi || x <= *hi);
      ASSERT_EQ(testing::full_match(g, std::to_string(x)), inside) << x << " in [" << lo.value_or(-1) << ", "
                                                                    << hi.value_or(-1) << "]";
    }
    EXPECT_FALSE(testing::full_match(g, "-0"));
    EXPECT_FALSE(testing::full_match(g, "007"));
  }
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "number", "multipleOf": 2})", "'multipleOf'"},
      {R"({"type": "object", "patternProperties": {"a": {}}})", "'patternProperties'"},
      {R"({"type": "object", "properties": {"x": {"type": "string", "contentEncoding": "base64"}}})",
       "'contentEncoding' at #/properties/x"},
      {R"({"oneOf": [{"type": "string"}]})", "'oneOf'"},
      {R"({"not": {"type": "string"}})", "'not'"},
      {R"({"type": "array", "prefixItems": []})", "'prefixItems'"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems'"},
      {R"({"type": "number", "minimum": 0})", "'minimum' at # is only supported for integers"},
      {R"({"type": "string", "format": "credit-card"})", "format 'credit-card'"},
      {R"({"type": "object", "additionalProperties": {"type": "string"}})", "'additionalProperties'"},
      {R"({"$ref": "https://example.com/s.json"})", "only references within the schema"},
      {R"({"$ref": "#/$defs/missing"})", "does not resolve"},
      {R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
      {R"({"type": "strin"})", "unknown type 'strin'"},
      {R"({"type": "array", "maxItems": 100000})", "'maxItems'"},
      {R"({"type": "integer", "minimum": 5, "maximum": 4})", "leave no value"},
      {R"({"enum": [1, 2], "type": "string"})", "no value of 'enum'"},
      {R"({"$ref": "#"})", "left-recursive"},
      {R"(false)", "no value matches"},
      {R"({"type": "string", "pattern": "a", "maxLength": 3})", "cannot be combined"},
  };
  for (const auto& [schema, reason] : cases) {
    try {
      testing::schema_grammar(ordered_json::parse(schema));
      ADD_FAILURE() << schema << " was accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << schema << ": " << e.what();
    }
  }
}

TEST(GrammarJsonSchema, HostileSchemasEndInErrorsQuickly) {
  // Deep nesting.
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_THROW(testing::schema_grammar(ordered_json::parse(deep)), GrammarError);
  // Many optional properties nested in many optional properties: bounded by the automaton limits.
  ordered_json wide = {{"type", "object"}, {"properties", ordered_json::object()}};
  for (int i = 0; i < 400; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "string"}};
  ordered_json nested = {{"type", "object"}, {"properties", ordered_json::object()}};
  for (int i = 0; i < 60; ++i) nested["properties"]["q" + std::to_string(i)] = wide;
  const auto start = std::chrono::steady_clock::now();
  try {
    testing::schema_grammar(nested);
  } catch (const GrammarError&) {
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, tessera::testing::time_bound(20));
}

}  // namespace
}  // namespace tessera::grammar
