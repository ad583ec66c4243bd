// A grammar before compilation: named rules whose bodies are expression trees over byte strings, code point
// sets and references to rules. Regular expressions, GBNF text and JSON Schemas are all translated into this
// form, and compile.h turns it into the automata the matcher runs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/code_point_set.h"

namespace tessera::grammar {

using ExprId = int32_t;
inline constexpr int32_t kUnbounded = -1;

enum class ExprKind : uint8_t {
  Empty,      // matches ""
  Literal,    // the bytes of `text`
  Chars,      // one code point of `chars`, UTF-8 encoded
  JsonChars,  // one code point of `chars` as a JSON string spells it: '"' as \", controls as \n or \u001f, ...
  Seq,        // `items` one after another
  Alt,        // one of `items`
  Repeat,     // items[0] between `min` and `max` times (kUnbounded: no upper limit)
  Ref,        // rule `rule`
};

struct Expr {
  ExprKind kind = ExprKind::Empty;
  std::string text;
  CodePointSet chars;
  std::vector<ExprId> items;
  int32_t min = 0, max = 0;
  int32_t rule = -1;
};

struct Rule {
  std::string name;
  ExprId body = -1;  // -1 while only referenced (a GBNF rule used before its definition)
  // Never copied into the rules that use it, however small: the JSON string body is shared by every string of a
  // schema, so that the matcher meets one automaton state for all of them (one cached mask instead of many).
  bool shared = false;
};

// Expressions are stored in one array and referred to by index; a subtree may be shared by several parents
// (it is immutable once built). Adding more than `max_exprs` nodes throws GrammarError: hostile input cannot
// grow a grammar without bound.
class GrammarIR {
 public:
  explicit GrammarIR(size_t max_exprs = 200000) : max_exprs_(max_exprs) {}

  ExprId empty();
  ExprId literal(std::string_view bytes);
  ExprId chars(CodePointSet set);
  ExprId json_chars(CodePointSet set);
  ExprId seq(std::vector<ExprId> items);
  ExprId alt(std::vector<ExprId> items);
  ExprId repeat(ExprId item, int32_t min, int32_t max);
  ExprId optional(ExprId item) { return repeat(item, 0, 1); }
  ExprId ref(int32_t rule);

  // The rule called `name`, created (without a body) when it does not exist yet.
  int32_t rule(std::string_view name);
  int32_t find_rule(std::string_view name) const;  // -1 when absent
  // A rule with a fresh name built from `base` ("base", "base-2", ...).
  int32_t new_rule(std::string_view base);
  void define(int32_t rule, ExprId body) { rules_[size_t(rule)].body = body; }
  void set_shared(int32_t rule) { rules_[size_t(rule)].shared = true; }

  const Expr& expr(ExprId id) const { return exprs_[size_t(id)]; }
  const std::vector<Rule>& rules() const { return rules_; }
  size_t n_exprs() const { return exprs_.size(); }

  int32_t root = -1;

 private:
  ExprId add(Expr e);
  size_t max_exprs_;
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, int32_t> rule_index_;
  std::unordered_map<std::string, int> next_suffix_;  // new_rule(): the last suffix used per base name
};

}  // namespace tessera::grammar
