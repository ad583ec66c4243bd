// Python operator semantics.
#include "chat/operators.h"

#include <algorithm>
#include <cmath>

#include "chat/pystr.h"
#include "chat/work_budget.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::Mod: return "%";
    case BinaryOp::Pow: return "** or pow()";
  }
  return "?";
}

const char* compare_symbol(CompareOp op) {
  switch (op) {
    case CompareOp::Lt: return "<";
    case CompareOp::Le: return "<=";
    case CompareOp::Gt: return ">";
    case CompareOp::Ge: return ">=";
    default: return "==";
  }
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op), type_name(a), type_name(b));
}

bool is_sequence(const Value& v) {
  return v.is_list() && (v.flavor() == Flavor::List || v.flavor() == Flavor::Tuple);
}

void check_overflow(bool overflow) {
  if (overflow) fail("integer overflow (the chat template interpreter has 64-bit integers)");
}

// Python's float floor division and modulo (floatobject.c's _float_div_mod).
void float_div_mod(double vx, double wx, double& floordiv, double& mod) {
  mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
}

size_t repeated_size(size_t unit, int64_t n) {
  size_t total = 0;
  return __builtin_mul_overflow(unit, size_t(n), &total) ? SIZE_MAX : total;
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    if (n <= 0) return Value(std::string());
    check_size(repeated_size(seq.str().size(), n));
    const size_t total = seq.str().size() * size_t(n);
    std::string out;
    out.reserve(total);
    out = seq.str();
    while (out.size() < total) out.append(out, 0, std::min(out.size(), total - out.size()));  // doubling
    return Value(std::move(out));
  }
  std::vector<Value> out;
  if (n > 0 && !seq.items().empty()) {  // [] * n is [] at once, however large n is
    check_size(repeated_size(seq.items().size() * sizeof(Value), n));
    charge_work(seq.items().size() * uint64_t(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  }
  return Value::list(std::move(out), seq.flavor());
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::Add: check_overflow(__builtin_add_overflow(x, y, &r)); return r;
      case BinaryOp::Sub: check_overflow(__builtin_sub_overflow(x, y, &r)); return r;
      case BinaryOp::Mul: check_overflow(__builtin_mul_overflow(x, y, &r)); return r;
      case BinaryOp::Div:
        if (y == 0) fail("division by zero");
        return double(x) / double(y);
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: {
        if (y == 0) fail("integer division or modulo by zero");
        check_overflow(x == INT64_MIN && y == -1);
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python rounds the quotient toward negative infinity
          q -= 1;
          m += y;
        }
        return op == BinaryOp::FloorDiv ? q : m;
      }
      case BinaryOp::Pow: {
        if (y < 0) {
          if (x == 0) fail("0.0 cannot be raised to a negative power");
          return std::pow(double(x), double(y));
        }
        int64_t result = 1, base = x, e = y;
        while (e > 0) {
          if (e & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
          e >>= 1;
          if (e > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
        }
        return result;
      }
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div:
      if (y == 0.0) fail("float division by zero");
      return x / y;
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: {
      if (y == 0.0) fail("{}", op == BinaryOp::Mod ? "float modulo" : "float floor division by zero");
      double q = 0, m = 0;
      float_div_mod(x, y, q, m);
      return op == BinaryOp::FloorDiv ? q : m;
    }
    case BinaryOp::Pow:
      if (x == 0.0 && y < 0) fail("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) fail("raising a negative number to a fractional power is not supported");
      return std::pow(x, y);
  }
  return Value();
}

// a < b where Python defines it; nullopt where it raises TypeError (the caller words the error).
std::optional<bool> try_less(const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    const long double x = a.kind() == Kind::Float ? a.as_float() : static_cast<long double>(a.as_int());
    const long double y = b.kind() == Kind::Float ? b.as_float() : static_cast<long double>(b.as_int());
    return x < y;
  }
  if (a.is_string() && b.is_string()) {
    charge_bytes(std::min(a.str().size(), b.str().size()));
    return a.str() < b.str();  // UTF-8 byte order is code point order
  }
  if (is_sequence(a) && is_sequence(b) && a.flavor() == b.flavor()) {
    const auto &x = a.items(), &y = b.items();
    charge_work(std::min(x.size(), y.size()));
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return try_less(x[i], y[i]);
    return x.size() < y.size();
  }
  return std::nullopt;
}

std::optional<int64_t> slice_bound(const Value& v) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_integral()) fail("slice indices must be integers or None or have an __index__ method");
  return v.as_int();
}

// hash(v) succeeds: what a dict key lookup or a set-like dict view accepts.
bool hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (!v.is_list()) return true;  // scalars, Undefined, and objects hashed by identity
  switch (v.flavor()) {
    case Flavor::Tuple:
      for (const Value& item : v.items())
        if (!hashable(item)) return false;
      return true;
    case Flavor::Range:
    case Flavor::Generator: return true;
    default: return false;  // list and the dict views
  }
}

}  // namespace

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::Mod && a.is_string()) fail("printf-style string formatting (str % value) is not supported");
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == BinaryOp::Add) {
    if (a.is_string() && b.is_string()) {
      check_size(a.str().size() + b.str().size());
      return a.str() + b.str();
    }
    if (is_sequence(a) && is_sequence(b) && a.flavor() == b.flavor()) {
      // As for `*`: `set ns.x = ns.x + ns.x` in a loop must not double a list without bound.
      check_size((a.items().size() + b.items().size()) * sizeof(Value));
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.flavor());
    }
    if (a.is_string() || is_sequence(a))
      fail("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a));
  }
  if (op == BinaryOp::Mul) {
    const bool a_seq = a.is_string() || is_sequence(a), b_seq = b.is_string() || is_sequence(b);
    if (a_seq && b.is_integral()) return repeat(a, b.as_int());
    if (b_seq && a.is_integral()) return repeat(b, a.as_int());
    if (a_seq || b_seq) fail("can't multiply sequence by non-int of type '{}'", type_name(a_seq ? b : a));
  }
  unsupported_operands(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_integral()) {
    check_overflow(v.as_int() == INT64_MIN);
    return -v.as_int();
  }
  if (v.kind() == Kind::Float) return -v.as_float();
  fail("bad operand type for unary -: '{}'", type_name(v));
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_integral()) return v.as_int();
  if (v.kind() == Kind::Float) return v;
  fail("bad operand type for unary +: '{}'", type_name(v));
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  if (op == CompareOp::Eq) return equals(a, b);
  if (op == CompareOp::Ne) return !equals(a, b);
  if (op == CompareOp::In) return contains(b, a);
  if (op == CompareOp::NotIn) return !contains(b, a);
  const bool swap = op == CompareOp::Gt || op == CompareOp::Ge;
  const std::optional<bool> lt = swap ? try_less(b, a) : try_less(a, b);
  if (!lt) fail("'{}' not supported between instances of '{}' and '{}'", compare_symbol(op), type_name(a), type_name(b));
  // a <= b is (a < b or a == b), not !(b < a): NaN compares false both ways.
  return *lt || ((op == CompareOp::Le || op == CompareOp::Ge) && equals(a, b));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined: return false;  // Jinja's Undefined iterates as empty
    case Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not {}", type_name(item));
      return pystr::find(container.str(), item.str()) != std::string::npos;
    case Kind::List:
      // The set-like views hash what they look up; a list or a generator compares item by item.
      if ((container.flavor() == Flavor::DictKeys || container.flavor() == Flavor::DictItems) && !hashable(item))
        fail("unhashable type: '{}'", type_name(item));
      charge_work(container.items().size());
      for (const Value& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Kind::Dict:
      if (!hashable(item)) fail("unhashable type: '{}'", type_name(item));
      return item.is_string() && container.dict().find(item.str()) != nullptr;
    default: fail("argument of type '{}' is not iterable", type_name(container));
  }
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  const std::optional<int64_t> b = slice_bound(start), e = slice_bound(stop), s = slice_bound(step);
  if (s && *s == 0) fail("slice step cannot be zero");
  if (object.is_undefined()) object.fail_undefined();
  if (object.is_string()) {
    const std::u32string text = pystr::decode(object.str());
    std::u32string out;
    const pystr::SliceRange r = pystr::slice_indices(int64_t(text.size()), b, e, s.value_or(1));
    out.reserve(size_t(r.count));
    for (int64_t i = 0; i < r.count; ++i) out.push_back(text[size_t(r[i])]);
    return pystr::encode(out);
  }
  if (is_sequence(object)) {
    std::vector<Value> out;
    const std::vector<Value>& items = object.items();
    const pystr::SliceRange r = pystr::slice_indices(int64_t(items.size()), b, e, s.value_or(1));
    out.reserve(size_t(r.count));
    for (int64_t i = 0; i < r.count; ++i) out.push_back(items[size_t(r[i])]);
    return Value::list(std::move(out), object.flavor());
  }
  // Jinja compiles a slice to a plain Python subscription (not its forgiving getitem), so these raise.
  if (object.is_list() && object.flavor() == Flavor::Range) fail("slicing a range is not supported");
  if (object.is_dict()) fail("unhashable type: 'slice'");
  fail("'{}' object is not subscriptable", type_name(object));
}

}  // namespace tessera::chat
