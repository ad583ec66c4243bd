// Statement execution and expression evaluation with Jinja's semantics.
#include "chat/interpreter.h"

#include "chat/errors.h"
#include "chat/operators.h"
#include "chat/work_budget.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

// A rendered prompt larger than this is refused: no model's context holds it, and a template must not be
// able to exhaust memory by doubling a string in a loop.
constexpr size_t kMaxOutputBytes = size_t(64) << 20;

std::vector<Value> unpack(const Value& value, size_t n) {
  std::vector<Value> parts = iterate(value);
  if (parts.size() > n) fail("too many values to unpack (expected {})", n);
  if (parts.size() < n) fail("not enough values to unpack (expected {}, got {})", n, parts.size());
  return parts;
}

}  // namespace

void Interpreter::Frame::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

Interpreter::Interpreter(const Dict& context, const Clock& now)
    : context_(context), globals_(make_globals(now, namespaces_)) {}

Interpreter::~Interpreter() {
  for (const Value& ns : namespaces_) ns.namespace_attrs().clear();
}

std::string Interpreter::run(const Body& body) {
  Frame root;
  exec(body, root);
  return std::move(out_);
}

void Interpreter::emit(std::string_view text) {
  charge_bytes(text.size());
  out_.append(text);
  if (out_.size() > kMaxOutputBytes) fail("the rendered prompt is larger than {} bytes", kMaxOutputBytes);
}

Interpreter::Flow Interpreter::exec(const Body& body, Frame& frame) {
  for (const NodePtr& node : body) {
    const Flow flow = exec_node(*node, frame);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_node(const Node& node, Frame& frame) {
  try {
    charge_work(1);
    switch (node.type) {
      case NodeType::Text: emit(static_cast<const TextNode&>(node).text); break;
      case NodeType::Output: emit(to_str(eval(*static_cast<const OutputNode&>(node).expr, frame))); break;
      case NodeType::If: {
        const auto& n = static_cast<const IfNode&>(node);
        for (const auto& [test, body] : n.branches)
          if (truthy(eval(*test, frame))) return exec(body, frame);
        return exec(n.else_body, frame);
      }
      case NodeType::For: return exec_for(static_cast<const ForNode&>(node), frame);
      case NodeType::Set: {
        const auto& n = static_cast<const SetNode&>(node);
        assign(n.target, eval(*n.value, frame), frame);
        break;
      }
      case NodeType::SetBlock: {
        const auto& n = static_cast<const SetBlockNode&>(node);
        std::string saved = std::move(out_);
        out_.clear();
        const Flow flow = exec(n.body, frame);
        Value captured(std::move(out_));
        out_ = std::move(saved);
        if (n.filter) captured = eval_filter(static_cast<const FilterExpr&>(*n.filter), frame, &captured);
        assign(n.target, std::move(captured), frame);
        return flow;
      }
      case NodeType::Break: return Flow::Break;
      case NodeType::Continue: return Flow::Continue;
      case NodeType::Generation: {
        Frame inner{&frame, {}};
        return exec(static_cast<const BodyNode&>(node).body, inner);
      }
    }
  } catch (const TemplateError&) {
    throw;  // already carries its line (or is the template's own raise_exception)
  } catch (const Error& e) {
    throw RenderError(node.line, e.what());
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const ForNode& node, Frame& frame) {
  std::vector<Value> items = iterate(eval(*node.iterable, frame));
  if (node.filter) {  // `for x in xs if cond`: loop.length and loop.last count only what passes
    std::vector<Value> kept;
    for (Value& item : items) {
      Frame probe{&frame, {}};
      assign(node.target, item, probe);
      if (truthy(eval(*node.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Frame inner{&frame, {}};
    return exec(node.else_body, inner);  // a break/continue here belongs to the enclosing loop
  }
  const int64_t n = int64_t(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge_work(1);
    Frame iteration{&frame, {}};
    assign(node.target, items[size_t(i)], iteration);
    LoopInfo info;
    info.index0 = i;
    info.length = n;
    if (i > 0) info.previtem = items[size_t(i - 1)];
    if (i + 1 < n) info.nextitem = items[size_t(i + 1)];
    iteration.set("loop", Value::loop(std::move(info)));
    if (exec(node.body, iteration) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& target, Value value, Frame& frame) {
  switch (target.kind) {
    case Target::Kind::Name: frame.set(target.names[0], std::move(value)); return;
    case Target::Kind::Unpack: {
      std::vector<Value> parts = unpack(value, target.names.size());
      for (size_t i = 0; i < parts.size(); ++i) frame.set(target.names[i], std::move(parts[i]));
      return;
    }
    case Target::Kind::Attribute: {
      const Value ns = lookup(target.names[0], frame);
      if (ns.kind() != Kind::Namespace) fail("Cannot assign attribute on non-namespace object");
      ns.namespace_attrs().set(target.attribute, std::move(value));
      return;
    }
  }
}

Value Interpreter::lookup(const std::string& name, Frame& frame) const {
  for (const Frame* f = &frame; f; f = f->parent)
    for (const auto& [k, v] : f->vars)
      if (k == name) return v;
  if (const Value* v = context_.find(name)) return *v;
  if (const Value* v = globals_.find(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

CallArgs Interpreter::eval_args(const ArgExprs& args, Frame& frame) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e, frame));
  for (const auto& [k, e] : args.keyword) out.keyword.emplace_back(k, eval(*e, frame));
  return out;
}

Value Interpreter::eval_call(const CallExpr& expr, Frame& frame) {
  const Value callee = eval(*expr.callee, frame);
  const CallArgs args = eval_args(expr.args, frame);
  if (callee.is_undefined()) callee.fail_undefined();
  if (callee.kind() != Kind::Callable) fail("'{}' object is not callable", type_name(callee));
  return callee.call(args);
}

// A filter chain evaluates innermost first; `input` replaces the innermost value of a {% set x | f %} chain.
Value Interpreter::eval_filter(const FilterExpr& expr, Frame& frame, const Value* input) {
  Value value;
  if (expr.value)
    value = expr.value->type == ExprType::Filter && input
                ? eval_filter(static_cast<const FilterExpr&>(*expr.value), frame, input)
                : eval(*expr.value, frame);
  else if (input)
    value = *input;
  return expr.fn(value, eval_args(expr.args, frame));
}

Value Interpreter::eval(const Expr& expr, Frame& frame) {
  charge_work(1);
  switch (expr.type) {
    case ExprType::Const: return static_cast<const ConstExpr&>(expr).value;
    case ExprType::Name: return lookup(static_cast<const NameExpr&>(expr).name, frame);
    case ExprType::GetAttr: {
      const auto& e = static_cast<const GetAttrExpr&>(expr);
      return get_attribute(eval(*e.object, frame), e.name);
    }
    case ExprType::GetItem: {
      const auto& e = static_cast<const GetItemExpr&>(expr);
      const Value object = eval(*e.object, frame);
      if (e.index->type == ExprType::Slice) {
        const auto& s = static_cast<const SliceExpr&>(*e.index);
        auto bound = [&](const ExprPtr& b) { return b ? eval(*b, frame) : Value::none(); };
        return slice(object, bound(s.start), bound(s.stop), bound(s.step));
      }
      return get_item(object, eval(*e.index, frame));
    }
    case ExprType::Slice: fail("a slice outside of a subscript");
    case ExprType::Call: return eval_call(static_cast<const CallExpr&>(expr), frame);
    case ExprType::Filter: return eval_filter(static_cast<const FilterExpr&>(expr), frame, nullptr);
    case ExprType::Test: {
      const auto& e = static_cast<const TestExpr&>(expr);
      const Value value = eval(*e.value, frame);
      return e.fn(value, eval_args(e.args, frame));
    }
    case ExprType::Not: return !truthy(eval(*static_cast<const UnaryExpr&>(expr).operand, frame));
    case ExprType::Neg: return negate(eval(*static_cast<const UnaryExpr&>(expr).operand, frame));
    case ExprType::Pos: return unary_plus(eval(*static_cast<const UnaryExpr&>(expr).operand, frame));
    case ExprType::Binary: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      const Value left = eval(*e.left, frame);
      return binary_op(e.op, left, eval(*e.right, frame));
    }
    case ExprType::And:
    case ExprType::Or: {  // Python returns the deciding operand, not a bool
      const auto& e = static_cast<const BinaryExpr&>(expr);
      Value left = eval(*e.left, frame);
      if (truthy(left) == (expr.type == ExprType::Or)) return left;
      return eval(*e.right, frame);
    }
    case ExprType::Concat: {
      std::string out;
      for (const ExprPtr& part : static_cast<const ConcatExpr&>(expr).parts) {
        out += to_str(eval(*part, frame));
        if (out.size() > kMaxStringBytes) fail("the result would be larger than {} bytes", kMaxStringBytes);
      }
      return out;
    }
    case ExprType::Compare: {  // a < b < c is a < b and b < c, each operand evaluated once
      const auto& e = static_cast<const CompareExpr&>(expr);
      Value left = eval(*e.first, frame);
      for (const auto& [op, operand] : e.rest) {
        Value right = eval(*operand, frame);
        if (!compare(op, left, right)) return false;
        left = std::move(right);
      }
      return true;
    }
    case ExprType::Cond: {
      const auto& e = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*e.test, frame))) return eval(*e.then, frame);
      if (e.otherwise) return eval(*e.otherwise, frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprType::List:
    case ExprType::Tuple: {
      std::vector<Value> items;
      for (const ExprPtr& item : static_cast<const SequenceExpr&>(expr).items) items.push_back(eval(*item, frame));
      return Value::list(std::move(items), expr.type == ExprType::List ? Flavor::List : Flavor::Tuple);
    }
    case ExprType::Dict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(expr).items) {
        const Value key = eval(*k, frame);
        if (!key.is_string()) fail("dict literals with {} keys are not supported (only strings)", type_name(key));
        d.set(key.str(), eval(*v, frame));
      }
      return Value::dict(std::move(d));
    }
  }
  return Value();
}

}  // namespace tessera::chat
