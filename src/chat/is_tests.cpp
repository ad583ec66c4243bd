// Jinja's tests (`x is string`, `x is not none`, `x is divisibleby 3`), with Python's answers for Jinja's
// Undefined: it is iterable, a sequence and even callable, which real templates depend on (Llama 3.1 prints a
// string message content with tojson because `content is iterable`).
#include <algorithm>

#include "chat/builtins.h"
#include "chat/operators.h"
#include "chat/unicode_tables.h"
#include "chat/pystr.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

Value one_arg(const CallArgs& args, const char* test) {
  const BoundArgs a(test, args, {"other"});
  if (!a.get(0)) fail("the test '{}' needs an argument", test);
  return *a.get(0);
}

void no_args(const CallArgs& args, const char* test) { BoundArgs(test, args, {}); }

bool test_defined(const Value& v, const CallArgs& a) { return no_args(a, "defined"), !v.is_undefined(); }
bool test_undefined(const Value& v, const CallArgs& a) { return no_args(a, "undefined"), v.is_undefined(); }
bool test_none(const Value& v, const CallArgs& a) { return no_args(a, "none"), v.is_none(); }
bool test_boolean(const Value& v, const CallArgs& a) { return no_args(a, "boolean"), v.kind() == Kind::Bool; }
bool test_true(const Value& v, const CallArgs& a) { return no_args(a, "true"), v.kind() == Kind::Bool && v.as_bool(); }
bool test_false(const Value& v, const CallArgs& a) { return no_args(a, "false"), v.kind() == Kind::Bool && !v.as_bool(); }
bool test_integer(const Value& v, const CallArgs& a) { return no_args(a, "integer"), v.kind() == Kind::Int; }
bool test_float(const Value& v, const CallArgs& a) { return no_args(a, "float"), v.kind() == Kind::Float; }
bool test_number(const Value& v, const CallArgs& a) { return no_args(a, "number"), v.is_number(); }
bool test_string(const Value& v, const CallArgs& a) { return no_args(a, "string"), v.is_string(); }
bool test_mapping(const Value& v, const CallArgs& a) { return no_args(a, "mapping"), v.is_dict(); }

bool test_iterable(const Value& v, const CallArgs& a) {  // iter(v) succeeds
  no_args(a, "iterable");
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::String:
    case Kind::List:
    case Kind::Dict:
    case Kind::Loop: return true;
    default: return false;
  }
}

bool test_sequence(const Value& v, const CallArgs& a) {  // len(v) and v.__getitem__ both exist
  no_args(a, "sequence");
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::String:
    case Kind::Dict: return true;
    case Kind::List: return v.flavor() == Flavor::List || v.flavor() == Flavor::Tuple || v.flavor() == Flavor::Range;
    default: return false;
  }
}

bool test_callable(const Value& v, const CallArgs& a) {  // Undefined and the loop object define __call__
  no_args(a, "callable");
  return v.kind() == Kind::Callable || v.is_undefined() || v.kind() == Kind::Loop;
}

// value % 2 == 1 and value % 2 == 0: a float such as 2.5 is neither.
bool test_odd(const Value& v, const CallArgs& a) {
  no_args(a, "odd");
  return equals(binary_op(BinaryOp::Mod, v, Value(int64_t(2))), Value(int64_t(1)));
}

bool test_even(const Value& v, const CallArgs& a) {
  no_args(a, "even");
  return equals(binary_op(BinaryOp::Mod, v, Value(int64_t(2))), Value(int64_t(0)));
}

bool test_divisibleby(const Value& v, const CallArgs& a) {
  return equals(binary_op(BinaryOp::Mod, v, one_arg(a, "divisibleby")), Value(int64_t(0)));
}

bool test_eq(const Value& v, const CallArgs& a) { return compare(CompareOp::Eq, v, one_arg(a, "eq")); }
bool test_ne(const Value& v, const CallArgs& a) { return compare(CompareOp::Ne, v, one_arg(a, "ne")); }
bool test_lt(const Value& v, const CallArgs& a) { return compare(CompareOp::Lt, v, one_arg(a, "lt")); }
bool test_le(const Value& v, const CallArgs& a) { return compare(CompareOp::Le, v, one_arg(a, "le")); }
bool test_gt(const Value& v, const CallArgs& a) { return compare(CompareOp::Gt, v, one_arg(a, "gt")); }
bool test_ge(const Value& v, const CallArgs& a) { return compare(CompareOp::Ge, v, one_arg(a, "ge")); }
bool test_in(const Value& v, const CallArgs& a) { return contains(one_arg(a, "in"), v); }

// `is sameas` is Python's `is`: exact for None, booleans and Undefined-free containers; for numbers and strings
// it depends on CPython's object caching, so it is refused rather than guessed.
bool test_sameas(const Value& v, const CallArgs& a) {
  const Value other = one_arg(a, "sameas");
  for (const Value* x : {&v, &other})
    if (x->kind() == Kind::None || x->kind() == Kind::Bool)
      return v.kind() == other.kind() && (v.is_none() || v.as_bool() == other.as_bool());
  if (v.identity() && other.identity() && !v.is_string() && !other.is_string()) return v.identity() == other.identity();
  fail("the test 'sameas' is only supported with none, true, false or containers");
}

// str.islower() / isupper(): a cased character, and none of the other case.
bool case_test(const Value& v, bool want_lower, const char* name) {
  const std::string s = to_str(v);
  bool cased = false;
  for (char32_t c : pystr::decode(s)) {
    if (cased_non_ascii(c)) fail("the test '{}' of non-ASCII letters is not supported", name);
    const bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    if ((want_lower && upper) || (!want_lower && lower)) return false;
    cased = cased || lower || upper;
  }
  return cased;
}

bool test_lower(const Value& v, const CallArgs& a) { return no_args(a, "lower"), case_test(v, true, "lower"); }
bool test_upper(const Value& v, const CallArgs& a) { return no_args(a, "upper"), case_test(v, false, "upper"); }

struct NamedTest {
  std::string_view name;
  TestFn fn;
};

constexpr NamedTest kTests[] = {
    {"boolean", test_boolean},   {"callable", test_callable}, {"defined", test_defined}, {"divisibleby", test_divisibleby},
    {"eq", test_eq},             {"equalto", test_eq},        {"==", test_eq},           {"even", test_even},
    {"false", test_false},       {"float", test_float},       {"ge", test_ge},           {">=", test_ge},
    {"gt", test_gt},             {"greaterthan", test_gt},    {">", test_gt},            {"in", test_in},
    {"integer", test_integer},   {"iterable", test_iterable}, {"le", test_le},           {"<=", test_le},
    {"lower", test_lower},       {"lt", test_lt},             {"lessthan", test_lt},     {"<", test_lt},
    {"mapping", test_mapping},   {"ne", test_ne},             {"!=", test_ne},           {"none", test_none},
    {"number", test_number},     {"odd", test_odd},           {"sameas", test_sameas},   {"sequence", test_sequence},
    {"string", test_string},     {"true", test_true},         {"undefined", test_undefined}, {"upper", test_upper},
};

constexpr std::string_view kJinjaTests[] = {"escaped", "filter", "test"};  // Jinja's, not implemented here

}  // namespace

TestFn find_test(std::string_view name) {
  for (const NamedTest& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

bool is_jinja_test(std::string_view name) {
  return find_test(name) != nullptr ||
         std::find(std::begin(kJinjaTests), std::end(kJinjaTests), name) != std::end(kJinjaTests);
}

}  // namespace tessera::chat
