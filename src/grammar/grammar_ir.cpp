// Building grammar expressions.
#include "grammar/grammar_ir.h"

#include "grammar/grammar_error.h"

namespace tessera::grammar {

ExprId GrammarIR::add(Expr e) {
  if (exprs_.size() >= max_exprs_) grammar_fail("the grammar is too large (more than {} expressions)", max_exprs_);
  exprs_.push_back(std::move(e));
  return ExprId(exprs_.size() - 1);
}

ExprId GrammarIR::empty() { return add(Expr{}); }

ExprId GrammarIR::literal(std::string_view bytes) {
  if (bytes.empty()) return empty();
  Expr e;
  e.kind = ExprKind::Literal;
  e.text = std::string(bytes);
  return add(std::move(e));
}

ExprId GrammarIR::chars(CodePointSet set) {
  Expr e;
  e.kind = ExprKind::Chars;
  e.chars = std::move(set);
  return add(std::move(e));
}

ExprId GrammarIR::json_chars(CodePointSet set) {
  Expr e;
  e.kind = ExprKind::JsonChars;
  e.chars = std::move(set);
  return add(std::move(e));
}

ExprId GrammarIR::seq(std::vector<ExprId> items) {
  if (items.empty()) return empty();
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::Seq;
  e.items = std::move(items);
  return add(std::move(e));
}

ExprId GrammarIR::alt(std::vector<ExprId> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::Alt;  // no items: matches nothing
  e.items = std::move(items);
  return add(std::move(e));
}

ExprId GrammarIR::repeat(ExprId item, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::Repeat;
  e.items = {item};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

ExprId GrammarIR::ref(int32_t rule) {
  Expr e;
  e.kind = ExprKind::Ref;
  e.rule = rule;
  return add(std::move(e));
}

int32_t GrammarIR::find_rule(std::string_view name) const {
  const auto it = rule_index_.find(std::string(name));
  return it == rule_index_.end() ? -1 : it->second;
}

int32_t GrammarIR::rule(std::string_view name) {
  const int32_t found = find_rule(name);
  if (found >= 0) return found;
  if (rules_.size() >= max_exprs_) grammar_fail("the grammar has too many rules");
  rules_.push_back({std::string(name), -1, false});
  rule_index_.emplace(std::string(name), int32_t(rules_.size() - 1));
  return int32_t(rules_.size() - 1);
}

int32_t GrammarIR::new_rule(std::string_view base) {
  std::string name(base);
  int& suffix = next_suffix_[name];
  while (find_rule(name) >= 0) name = std::string(base) + "-" + std::to_string(++suffix + 1);
  return rule(name);
}

}  // namespace tessera::grammar
