// The tree-walking interpreter behind Template::render: one instance per render (it holds the output and the
// variable frames), over an AST that stays shared and immutable.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/builtins.h"

namespace tessera::chat {

class Interpreter {
 public:
  Interpreter(const Dict& context, const Clock& now);
  ~Interpreter();  // empties the render's namespaces: breaks `set ns.x = [ns]` reference cycles
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string run(const Body& body);

 private:
  // Jinja's scoping: every for-loop iteration (and a generation block) gets a fresh frame, so `set` inside a
  // loop is gone at the next iteration and after the loop (that is why templates use namespace()); `if`
  // blocks share their parent's frame.
  struct Frame {
    Frame* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
    void set(const std::string& name, Value value);
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, Frame& frame);
  Flow exec_node(const Node& node, Frame& frame);
  Flow exec_for(const ForNode& node, Frame& frame);
  void assign(const Target& target, Value value, Frame& frame);
  void emit(std::string_view text);

  Value eval(const Expr& expr, Frame& frame);
  Value eval_call(const CallExpr& expr, Frame& frame);
  Value eval_filter(const FilterExpr& expr, Frame& frame, const Value* input);
  CallArgs eval_args(const ArgExprs& args, Frame& frame);
  Value lookup(const std::string& name, Frame& frame) const;

  const Dict& context_;
  std::vector<Value> namespaces_;  // every namespace() of this render; declared before globals_, which refer to it
  Dict globals_;
  std::string out_;
};

}  // namespace tessera::chat
