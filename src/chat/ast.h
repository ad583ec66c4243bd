// The parsed template: expressions and statements as the parser builds them and the interpreter walks them.
// Nodes are plain structs with a type tag (the interpreter switches on it) and the source line for errors.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/builtins.h"
#include "chat/operators.h"
#include "chat/value.h"

namespace tessera::chat {

// ---- Expressions ----

enum class ExprType : uint8_t {
  Const, Name, GetAttr, GetItem, Slice, Call, Filter, Test, Not, Neg, Pos, Binary, Concat, Compare, Cond, And, Or,
  List, Tuple, Dict,
};

struct Expr {
  Expr(ExprType type, int line) : type(type), line(line) {}
  virtual ~Expr() = default;
  ExprType type;
  int line;
  // The longest path to a leaf, this node included: evaluating and freeing the tree recurse that deep, so the
  // parser refuses tall trees (chains like a + b + c grow it by one per operator without the parser recursing).
  int height = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

// Heights of optional children (0 for none), for the constructors below.
inline int height_of(const ExprPtr& e) { return e ? e->height : 0; }
inline int height_of(const std::vector<ExprPtr>& items) {
  int h = 0;
  for (const ExprPtr& e : items) h = std::max(h, height_of(e));
  return h;
}
inline int height_of(const ArgExprs& args) {
  int h = height_of(args.positional);
  for (const auto& [name, e] : args.keyword) h = std::max(h, height_of(e));
  return h;
}

struct ConstExpr : Expr {
  ConstExpr(Value value, int line) : Expr(ExprType::Const, line), value(std::move(value)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string name, int line) : Expr(ExprType::Name, line), name(std::move(name)) {}
  std::string name;
};

struct GetAttrExpr : Expr {  // object.name
  GetAttrExpr(ExprPtr object, std::string name, int line)
      : Expr(ExprType::GetAttr, line), object(std::move(object)), name(std::move(name)) {
    height = 1 + height_of(this->object);
  }
  ExprPtr object;
  std::string name;
};

struct GetItemExpr : Expr {  // object[index]; index may be a SliceExpr
  GetItemExpr(ExprPtr object, ExprPtr index, int line)
      : Expr(ExprType::GetItem, line), object(std::move(object)), index(std::move(index)) {
    height = 1 + std::max(height_of(this->object), height_of(this->index));
  }
  ExprPtr object, index;
};

struct SliceExpr : Expr {  // start:stop:step, each optional
  SliceExpr(ExprPtr start, ExprPtr stop, ExprPtr step, int line)
      : Expr(ExprType::Slice, line), start(std::move(start)), stop(std::move(stop)), step(std::move(step)) {
    height = 1 + std::max({height_of(this->start), height_of(this->stop), height_of(this->step)});
  }
  ExprPtr start, stop, step;
};

struct CallExpr : Expr {
  CallExpr(ExprPtr callee, ArgExprs args, int line)
      : Expr(ExprType::Call, line), callee(std::move(callee)), args(std::move(args)) {
    height = 1 + std::max(height_of(this->callee), height_of(this->args));
  }
  ExprPtr callee;
  ArgExprs args;
};

struct FilterExpr : Expr {  // value | name(args); value is null in `{% set x | filter %}` blocks
  FilterExpr(ExprPtr value, std::string name, FilterFn fn, ArgExprs args, int line)
      : Expr(ExprType::Filter, line), value(std::move(value)), name(std::move(name)), fn(fn), args(std::move(args)) {
    height = 1 + std::max(height_of(this->value), height_of(this->args));
  }
  ExprPtr value;
  std::string name;
  FilterFn fn;
  ArgExprs args;
};

struct TestExpr : Expr {  // value is name(args); "is not" is a NotExpr around it
  TestExpr(ExprPtr value, std::string name, TestFn fn, ArgExprs args, int line)
      : Expr(ExprType::Test, line), value(std::move(value)), name(std::move(name)), fn(fn), args(std::move(args)) {
    height = 1 + std::max(height_of(this->value), height_of(this->args));
  }
  ExprPtr value;
  std::string name;
  TestFn fn;
  ArgExprs args;
};

struct UnaryExpr : Expr {  // Not, Neg, Pos
  UnaryExpr(ExprType type, ExprPtr operand, int line) : Expr(type, line), operand(std::move(operand)) {
    height = 1 + height_of(this->operand);
  }
  ExprPtr operand;
};

struct BinaryExpr : Expr {  // arithmetic (Binary), and the short-circuit And / Or
  BinaryExpr(ExprType type, BinaryOp op, ExprPtr left, ExprPtr right, int line)
      : Expr(type, line), op(op), left(std::move(left)), right(std::move(right)) {
    height = 1 + std::max(height_of(this->left), height_of(this->right));
  }
  BinaryOp op;
  ExprPtr left, right;
};

struct ConcatExpr : Expr {  // a ~ b ~ c
  ConcatExpr(std::vector<ExprPtr> parts, int line) : Expr(ExprType::Concat, line), parts(std::move(parts)) {
    height = 1 + height_of(this->parts);
  }
  std::vector<ExprPtr> parts;
};

struct CompareExpr : Expr {  // Python's chained comparison: a < b < c
  CompareExpr(ExprPtr first, int line) : Expr(ExprType::Compare, line), first(std::move(first)) {
    height = 1 + height_of(this->first);
  }
  void add(CompareOp op, ExprPtr operand) {
    height = std::max(height, 1 + height_of(operand));
    rest.emplace_back(op, std::move(operand));
  }
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {  // then if test else otherwise; without else, Undefined
  CondExpr(ExprPtr test, ExprPtr then, ExprPtr otherwise, int line)
      : Expr(ExprType::Cond, line), test(std::move(test)), then(std::move(then)), otherwise(std::move(otherwise)) {
    height = 1 + std::max({height_of(this->test), height_of(this->then), height_of(this->otherwise)});
  }
  ExprPtr test, then, otherwise;
};

struct SequenceExpr : Expr {  // [a, b] (List) or (a, b) (Tuple)
  SequenceExpr(ExprType type, std::vector<ExprPtr> items, int line) : Expr(type, line), items(std::move(items)) {
    height = 1 + height_of(this->items);
  }
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int line) : Expr(ExprType::Dict, line) {}
  void add(ExprPtr key, ExprPtr value) {
    height = std::max({height, 1 + height_of(key), 1 + height_of(value)});
    items.emplace_back(std::move(key), std::move(value));
  }
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// ---- Statements ----

enum class NodeType : uint8_t { Text, Output, For, If, Set, SetBlock, Break, Continue, Generation };

struct Node {
  Node(NodeType type, int line) : type(type), line(line) {}
  virtual ~Node() = default;
  NodeType type;
  int line;
};
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// Where `for` and `set` store: a name, several names unpacked from one value, or a namespace attribute.
struct Target {
  enum class Kind : uint8_t { Name, Unpack, Attribute } kind = Kind::Name;
  std::vector<std::string> names;  // Name: one; Unpack: several; Attribute: the namespace variable
  std::string attribute;           // Attribute only
};

struct TextNode : Node {
  TextNode(std::string text, int line) : Node(NodeType::Text, line), text(std::move(text)) {}
  std::string text;
};

struct OutputNode : Node {  // {{ expr }}
  OutputNode(ExprPtr expr, int line) : Node(NodeType::Output, line), expr(std::move(expr)) {}
  ExprPtr expr;
};

struct ForNode : Node {
  explicit ForNode(int line) : Node(NodeType::For, line) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`; may be null
  Body body, else_body;
};

struct IfNode : Node {
  explicit IfNode(int line) : Node(NodeType::If, line) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};

struct SetNode : Node {  // {% set target = value %}
  explicit SetNode(int line) : Node(NodeType::Set, line) {}
  Target target;
  ExprPtr value;
};

struct SetBlockNode : Node {  // {% set target | filters %}body{% endset %}
  explicit SetBlockNode(int line) : Node(NodeType::SetBlock, line) {}
  Target target;
  ExprPtr filter;  // a FilterExpr chain whose innermost value is null, or null
  Body body;
};

struct BodyNode : Node {  // Generation: Hugging Face's {% generation %} block, rendered as its body
  BodyNode(NodeType type, int line) : Node(type, line) {}
  Body body;
};

}  // namespace tessera::chat
