// Recursive descent over Jinja's grammar; the precedence ladder follows jinja2's parser (condexpr, or, and,
// not, comparisons, + -, ~, * / // %, **, unary, then postfix, filters and tests).
#include "chat/parser.h"

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>

#include "chat/errors.h"

namespace tessera::chat {
namespace {

// Deeper nesting than this is refused: the parser and the interpreter recurse once per level.
constexpr int kMaxDepth = 200;
constexpr int kMaxHeight = 200;  // of an expression tree (Expr::height)

// Jinja tags this interpreter does not implement: named in the error rather than "unknown tag".
constexpr std::string_view kUnsupportedTags[] = {"macro", "call", "filter", "block", "extends", "include",
                                                 "import", "from", "with", "autoescape", "do", "trans"};

class Parser {
 public:
  explicit Parser(const Lexed& lexed) : tokens_(lexed.tokens), map_(lexed.source) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != Tok::Eof) fail_here("unexpected '" + describe(cur()) + "'");
    return body;
  }

 private:
  // ---- token stream ----

  const Token& cur() const { return tokens_[pos_]; }
  const Token& look(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  int line() const { return map_.line(cur().offset); }

  bool is_op(std::string_view op) const { return cur().type == Tok::Operator && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Text: return "template data";
      case Tok::VarBegin: return "{{";
      case Tok::VarEnd: return "}}";
      case Tok::BlockBegin: return "{%";
      case Tok::BlockEnd: return "%}";
      case Tok::String: return "string";
      case Tok::Integer: return "integer";
      case Tok::Float: return "float";
      case Tok::Eof: return "end of template";
      default: return t.text;
    }
  }

  [[noreturn]] void fail_at(const Token& t, const std::string& message) const {
    throw SyntaxError(map_.line(t.offset), map_.column(t.offset), message);
  }
  [[noreturn]] void fail_here(const std::string& message) const { fail_at(cur(), message); }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail_here("expected '" + std::string(op) + "', got '" + describe(cur()) + "'");
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) fail_here(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    advance();
  }
  void expect_name(std::string_view name) {
    if (!skip_name(name)) fail_here("expected '" + std::string(name) + "', got '" + describe(cur()) + "'");
  }
  std::string expect_identifier() {
    if (cur().type != Tok::Name) fail_here("expected a name, got '" + describe(cur()) + "'");
    return advance().text;
  }

  // RAII guard for the nesting limit.
  struct Depth {
    explicit Depth(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) p.fail_here("the template is nested too deeply");
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };

  // Expression trees are refused where they grow past kMaxHeight (Expr::height): a chain (a + b + c, x|f|g, a.b.c,
  // a()(), x if c else y if d) deepens the tree by one per operator without the parser recursing, but evaluating
  // and freeing it recurse once per level.
  template <typename T>
  std::unique_ptr<T> checked(std::unique_ptr<T> e) {
    if (e->height > kMaxHeight) fail_here("the template is nested too deeply");
    return e;
  }
  template <typename T, typename... Args>
  std::unique_ptr<T> make(Args&&... args) {
    return checked(std::make_unique<T>(std::forward<Args>(args)...));
  }

  // ---- statements ----

  // Parses template data, {{ }} and {% %} until a block tag whose name is in `end_tags` (left current) or the
  // end of the template.
  Body subparse(std::initializer_list<std::string_view> end_tags) {
    Body body;
    while (cur().type != Tok::Eof) {
      const Token& t = cur();
      if (t.type == Tok::Text) {
        body.push_back(std::make_unique<TextNode>(t.text, map_.line(t.offset)));
        advance();
      } else if (t.type == Tok::VarBegin) {
        const int ln = map_.line(t.offset);
        advance();
        ExprPtr e = parse_tuple(true);
        expect(Tok::VarEnd, "'}}'");
        body.push_back(std::make_unique<OutputNode>(std::move(e), ln));
      } else if (t.type == Tok::BlockBegin) {
        advance();
        for (std::string_view end : end_tags)
          if (is_name(end)) return body;
        body.push_back(parse_statement());
        expect(Tok::BlockEnd, "'%}'");
      } else {
        fail_here("unexpected '" + describe(t) + "'");
      }
    }
    return body;
  }

  // The body of a block statement: the rest of the opening tag, then statements up to one of `end_tags`.
  Body parse_block_body(std::initializer_list<std::string_view> end_tags, const Token& opener) {
    expect(Tok::BlockEnd, "'%}'");
    Body body = subparse(end_tags);
    if (cur().type == Tok::Eof) {
      std::string wanted;
      for (std::string_view e : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(e) + "'";
      fail_here("unexpected end of template: expected " + wanted + " to close the '" + opener.text +
                "' tag on line " + std::to_string(map_.line(opener.offset)));
    }
    return body;
  }

  NodePtr parse_statement() {
    const Depth depth(*this);
    const Token& tag = cur();
    if (tag.type != Tok::Name) fail_here("expected a tag name, got '" + describe(tag) + "'");
    const std::string& name = tag.text;
    if (name == "for") return parse_for();
    if (name == "if") return parse_if();
    if (name == "set") return parse_set();
    if (name == "print") {  // {% print a, b %} prints a then b (not a tuple)
      const int ln = line();
      advance();
      std::vector<ExprPtr> parts;
      do {
        parts.push_back(parse_expression(true));
      } while (skip_op(","));
      if (parts.size() == 1) return std::make_unique<OutputNode>(std::move(parts[0]), ln);
      return std::make_unique<OutputNode>(make<ConcatExpr>(std::move(parts), ln), ln);
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail_here("'" + name + "' outside of a loop");
      const int ln = line();
      advance();
      return std::make_unique<Node>(name == "break" ? NodeType::Break : NodeType::Continue, ln);
    }
    if (name == "generation") {
      const Token& opener = advance();
      auto node = std::make_unique<BodyNode>(NodeType::Generation, map_.line(opener.offset));
      node->body = parse_block_body({"endgeneration"}, opener);
      advance();
      return node;
    }
    if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), name) != std::end(kUnsupportedTags))
      fail_here("the '" + name + "' tag is not supported by the chat template interpreter");
    if (name.starts_with("end") || name == "else" || name == "elif")
      fail_here("unexpected '" + name + "' (no open block it could close)");
    fail_here("unknown tag '" + name + "'");
  }

  NodePtr parse_for() {
    const Token& opener = advance();
    auto node = std::make_unique<ForNode>(map_.line(opener.offset));
    node->target = parse_target(/*with_namespace=*/false, "in");
    expect_name("in");
    node->iterable = parse_tuple(/*with_condexpr=*/false, "recursive");
    if (skip_name("if")) node->filter = parse_expression(true);
    if (is_name("recursive")) fail_here("recursive loops are not supported by the chat template interpreter");
    ++loop_depth_;
    node->body = parse_block_body({"endfor", "else"}, opener);
    --loop_depth_;
    // The else block runs after the loop: a `break` there belongs to an enclosing loop, if there is one.
    if (advance().text == "else") {
      node->else_body = parse_block_body({"endfor"}, opener);
      advance();
    }
    return node;
  }

  NodePtr parse_if() {
    const Token& opener = advance();
    auto node = std::make_unique<IfNode>(map_.line(opener.offset));
    while (true) {
      ExprPtr test = parse_tuple(/*with_condexpr=*/false);
      Body body = parse_block_body({"elif", "else", "endif"}, opener);
      node->branches.emplace_back(std::move(test), std::move(body));
      const std::string tag = advance().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        node->else_body = parse_block_body({"endif"}, opener);
        advance();
      }
      break;
    }
    return node;
  }

  NodePtr parse_set() {
    const Token& opener = advance();
    const int ln = map_.line(opener.offset);
    Target target = parse_target(/*with_namespace=*/true, "");
    if (skip_op("=")) {
      auto node = std::make_unique<SetNode>(ln);
      node->target = std::move(target);
      node->value = parse_tuple(true);
      return node;
    }
    auto node = std::make_unique<SetBlockNode>(ln);
    node->target = std::move(target);
    if (is_op("|")) node->filter = parse_filters(nullptr);
    node->body = parse_block_body({"endset"}, opener);
    advance();
    return node;
  }

  // A name, names separated by commas (optionally in parentheses), or namespace.attribute.
  Target parse_target(bool with_namespace, std::string_view end_name) {
    Target t;
    const bool parens = skip_op("(");
    while (true) {
      const Token& name_tok = cur();
      std::string name = expect_identifier();
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" || name == "None")
        fail_at(name_tok, "can't assign to the constant '" + name + "'");
      if (with_namespace && is_op(".")) {
        advance();
        t.kind = Target::Kind::Attribute;
        t.attribute = expect_identifier();
        t.names.push_back(std::move(name));
        if (is_op(",")) fail_here("assigning to several namespace attributes at once is not supported");
        return t;
      }
      t.names.push_back(std::move(name));
      if (!skip_op(",")) break;
      if ((parens && is_op(")")) || (!end_name.empty() && is_name(end_name)) || is_op("=")) break;  // trailing comma
    }
    if (parens) expect_op(")");
    t.kind = t.names.size() > 1 || parens ? Target::Kind::Unpack : Target::Kind::Name;
    if (parens && t.names.size() == 1) t.kind = Target::Kind::Name;  // (x) is just x
    return t;
  }

  // ---- expressions ----

  bool is_tuple_end(std::string_view extra_end) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    return !extra_end.empty() && is_name(extra_end);
  }

  // Expressions separated by commas make a tuple: `{{ a, b }}`, `for x in a, b`, `(a, b)`.
  ExprPtr parse_tuple(bool with_condexpr, std::string_view extra_end = "", bool explicit_parens = false) {
    const int ln = line();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail_here("expected an expression, got '" + describe(cur()) + "'");
    }
    return make<SequenceExpr>(ExprType::Tuple, std::move(items), ln);
  }

  ExprPtr parse_expression(bool with_condexpr) {
    const Depth depth(*this);
    if (!with_condexpr) return parse_or();
    const int ln = line();
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
      expr = make<CondExpr>(std::move(test), std::move(expr), std::move(otherwise), ln);
    }
    return expr;
  }

  using Operator = std::optional<std::pair<ExprType, BinaryOp>>;

  // One left-associative precedence level: operands from `next`, joined while `match` names an operator.
  template <typename Match>
  ExprPtr parse_left_assoc(ExprPtr (Parser::*next)(), Match match) {
    ExprPtr left = (this->*next)();
    while (const Operator op = match()) {
      const int ln = line();
      advance();
      left = make<BinaryExpr>(op->first, op->second, std::move(left), (this->*next)(), ln);
    }
    return left;
  }

  ExprPtr parse_or() {
    return parse_left_assoc(&Parser::parse_and, [this]() -> Operator {
      if (is_name("or")) return std::pair{ExprType::Or, BinaryOp::Add};  // the BinaryOp is unused for or/and
      return std::nullopt;
    });
  }

  ExprPtr parse_and() {
    return parse_left_assoc(&Parser::parse_not, [this]() -> Operator {
      if (is_name("and")) return std::pair{ExprType::And, BinaryOp::Add};
      return std::nullopt;
    });
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const Depth depth(*this);
      const int ln = line();
      advance();
      return make<UnaryExpr>(ExprType::Not, parse_not(), ln);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int ln = line();
    ExprPtr first = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CompareOp op;
      if (cur().type == Tok::Operator && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                          cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        const std::string& s = cur().text;
        op = s == "==" ? CompareOp::Eq : s == "!=" ? CompareOp::Ne : s == "<" ? CompareOp::Lt
           : s == "<=" ? CompareOp::Le : s == ">" ? CompareOp::Gt : CompareOp::Ge;
        advance();
      } else if (is_name("in")) {
        op = CompareOp::In;
        advance();
      } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
        op = CompareOp::NotIn;
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) cmp = make<CompareExpr>(std::move(first), ln);
      cmp->add(op, parse_math1());
      cmp = checked(std::move(cmp));
    }
    if (cmp) return cmp;
    return first;
  }

  ExprPtr parse_math1() {
    return parse_left_assoc(&Parser::parse_concat, [this]() -> Operator {
      if (is_op("+")) return std::pair{ExprType::Binary, BinaryOp::Add};
      if (is_op("-")) return std::pair{ExprType::Binary, BinaryOp::Sub};
      return std::nullopt;
    });
  }

  ExprPtr parse_concat() {
    const int ln = line();
    std::vector<ExprPtr> parts;
    parts.push_back(parse_math2());
    while (skip_op("~")) parts.push_back(parse_math2());
    if (parts.size() == 1) return std::move(parts[0]);
    return make<ConcatExpr>(std::move(parts), ln);
  }

  ExprPtr parse_math2() {
    return parse_left_assoc(&Parser::parse_pow, [this]() -> Operator {
      if (is_op("*")) return std::pair{ExprType::Binary, BinaryOp::Mul};
      if (is_op("/")) return std::pair{ExprType::Binary, BinaryOp::Div};
      if (is_op("//")) return std::pair{ExprType::Binary, BinaryOp::FloorDiv};
      if (is_op("%")) return std::pair{ExprType::Binary, BinaryOp::Mod};
      return std::nullopt;
    });
  }

  ExprPtr parse_pow() {
    return parse_left_assoc(&Parser::parse_filtered_unary, [this]() -> Operator {
      if (is_op("**")) return std::pair{ExprType::Binary, BinaryOp::Pow};
      return std::nullopt;
    });
  }

  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  // Unary minus binds looser than postfix and tighter than filters: -x.y|abs is (-(x.y))|abs.
  ExprPtr parse_unary(bool with_filter) {
    const Depth depth(*this);
    const int ln = line();
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const ExprType type = advance().text == "-" ? ExprType::Neg : ExprType::Pos;
      node = make<UnaryExpr>(type, parse_unary(false), ln);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Depth depth(*this);
    const Token& t = cur();
    const int ln = line();
    switch (t.type) {
      case Tok::Name: {
        advance();
        if (t.text == "true" || t.text == "True") return make<ConstExpr>(Value(true), ln);
        if (t.text == "false" || t.text == "False") return make<ConstExpr>(Value(false), ln);
        if (t.text == "none" || t.text == "None") return make<ConstExpr>(Value::none(), ln);
        return make<NameExpr>(t.text, ln);
      }
      case Tok::String: {
        std::string s;
        while (cur().type == Tok::String) s += advance().text;  // adjacent literals concatenate
        return make<ConstExpr>(Value(std::move(s)), ln);
      }
      case Tok::Integer: advance(); return make<ConstExpr>(Value(t.int_value), ln);
      case Tok::Float: advance(); return make<ConstExpr>(Value(t.float_value), ln);
      case Tok::Operator:
        if (t.text == "(") {
          advance();
          ExprPtr e = parse_tuple(true, "", /*explicit_parens=*/true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default: break;
    }
    fail_here("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_list() {
    const int ln = line();
    expect_op("[");
    std::vector<ExprPtr> items;
    while (!is_op("]")) {
      if (!items.empty()) expect_op(",");
      if (is_op("]")) break;
      items.push_back(parse_expression(true));
    }
    expect_op("]");
    return make<SequenceExpr>(ExprType::List, std::move(items), ln);
  }

  ExprPtr parse_dict() {
    auto node = make<DictExpr>(line());
    expect_op("{");
    while (!is_op("}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      node->add(std::move(key), parse_expression(true));
    }
    expect_op("}");
    return checked(std::move(node));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filters(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int ln = line();
    if (skip_op(".")) {
      if (cur().type == Tok::Name) return make<GetAttrExpr>(std::move(node), advance().text, ln);
      if (cur().type != Tok::Integer) fail_here("expected a name or number after '.'");
      auto index = make<ConstExpr>(Value(advance().int_value), ln);
      return make<GetItemExpr>(std::move(node), std::move(index), ln);
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail_here("expected a subscript expression");
    if (args.size() == 1) return make<GetItemExpr>(std::move(node), std::move(args[0]), ln);
    auto tuple = make<SequenceExpr>(ExprType::Tuple, std::move(args), ln);
    return make<GetItemExpr>(std::move(node), std::move(tuple), ln);
  }

  // An index or a slice start:stop:step with any part left out.
  ExprPtr parse_subscribed() {
    const int ln = line();
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    advance();  // ':'
    ExprPtr stop, step;
    if (!is_op(":") && !is_op("]") && !is_op(",")) stop = parse_expression(true);
    if (skip_op(":") && !is_op("]") && !is_op(",")) step = parse_expression(true);
    return make<SliceExpr>(std::move(start), std::move(stop), std::move(step), ln);
  }

  ArgExprs parse_call_args() {
    ArgExprs args;
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;  // trailing comma
      }
      if (is_op("*") || is_op("**")) fail_here("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && look().type == Tok::Operator && look().text == "=") {
        std::string key = advance().text;
        advance();
        args.keyword.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!args.keyword.empty()) fail_here("a positional argument follows a keyword argument");
        args.positional.push_back(parse_expression(true));
      }
      need_comma = true;
    }
    expect_op(")");
    return args;
  }

  ExprPtr parse_call(ExprPtr callee) {
    const int ln = line();
    ArgExprs args = parse_call_args();
    return make<CallExpr>(std::move(callee), std::move(args), ln);
  }

  std::string dotted_name() {
    std::string name = expect_identifier();
    while (skip_op(".")) name += "." + expect_identifier();
    return name;
  }

  // value | f | g(args): `value` is null in a {% set x | f %} block.
  ExprPtr parse_filters(ExprPtr value) {
    while (skip_op("|")) {
      const Token& name_tok = cur();
      const int ln = line();
      const std::string name = dotted_name();
      const FilterFn fn = find_filter(name);
      if (!fn)
        fail_at(name_tok, is_jinja_filter(name)
                              ? "the filter '" + name + "' is not supported by the chat template interpreter"
                              : "no filter named '" + name + "'");
      ArgExprs args = is_op("(") ? parse_call_args() : ArgExprs{};
      value = make<FilterExpr>(std::move(value), name, fn, std::move(args), ln);
    }
    return value;
  }

  ExprPtr parse_test(ExprPtr value) {
    const int ln = line();
    advance();  // 'is'
    const bool negated = skip_name("not");
    const Token& name_tok = cur();
    const std::string name = dotted_name();
    const TestFn fn = find_test(name);
    if (!fn)
      fail_at(name_tok, is_jinja_test(name) ? "the test '" + name + "' is not supported by the chat template interpreter"
                                            : "no test named '" + name + "'");
    ArgExprs args;
    if (is_op("(")) {
      args = parse_call_args();
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Integer ||
                cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      // Jinja's one-argument form: `x is divisibleby 3`, `x is sameas false`.
      if (is_name("is")) fail_here("you cannot chain multiple tests with 'is'");
      args.positional.push_back(parse_postfix(parse_primary()));
    }
    ExprPtr test = make<TestExpr>(std::move(value), name, fn, std::move(args), ln);
    if (negated) test = make<UnaryExpr>(ExprType::Not, std::move(test), ln);
    return test;
  }

  const std::vector<Token>& tokens_;
  SourceMap map_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const Lexed& lexed) { return Parser(lexed).parse_template(); }

}  // namespace tessera::chat
