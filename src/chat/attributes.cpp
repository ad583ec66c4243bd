// x.name and x[key] as Jinja's ImmutableSandboxedEnvironment resolves them, with the str and dict methods
// templates call. Python's own rules decide the order: for x.name an attribute (method) first, then the item;
// for x[key] the item first, then the attribute.
#include <algorithm>
#include <array>

#include "chat/builtins.h"
#include "chat/operators.h"
#include "chat/work_budget.h"
#include "chat/pystr.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

// Every method of Python's str, dict, list and tuple: a name here that is not implemented below is reported as
// unsupported when called, rather than treated as a missing attribute (which Jinja would not do).
constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format", "format_map",
    "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
    "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans", "partition",
    "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
constexpr std::string_view kDictMethods[] = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                             "pop", "popitem", "setdefault", "update", "values"};
constexpr std::string_view kListMethods[] = {"append", "clear", "copy", "count", "extend", "index",
                                             "insert", "pop", "remove", "reverse", "sort"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};  // tuple's and range's
constexpr std::string_view kNumberAttributes[] = {"real", "imag", "numerator", "denominator", "conjugate",
                                                  "bit_length", "bit_count", "to_bytes", "from_bytes",
                                                  "as_integer_ratio", "is_integer", "hex", "fromhex"};
// The sandbox refuses these (ImmutableSandboxedEnvironment: they modify a mutable container).
constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMutators[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend",
                                              "remove"};

template <size_t N>
bool in(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value unsupported_method(const std::string& type, const std::string& name) {
  return Value::callable(type + "." + name, [type, name](const CallArgs&) -> Value {
    fail("the {} method '{}' is not supported by the chat template interpreter", type, name);
  });
}

Value unsafe(const Value& object, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(object) + "' object is unsafe.");
}

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(pystr::repr(object_description(object)) + " has no attribute " + pystr::repr(name));
}

std::optional<std::string> optional_str(const Value* v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail("{} arg must be None or str", what);
  return v->str();
}

const std::string& str_arg(const Value* v, const char* function) {
  if (!v) fail("{}() is missing a required argument", function);
  if (!v->is_string()) fail("{}() argument must be str, not {}", function, type_name(*v));
  return v->str();
}

int64_t int_arg(const Value* v, int64_t fallback, const char* function) {
  if (!v) return fallback;
  if (!v->is_integral()) fail("'{}' object cannot be interpreted as an integer ({}())", type_name(*v), function);
  return v->as_int();
}

// s.startswith(prefix[, start[, end]]) and endswith: prefix may be a tuple of candidates.
bool affix_match(const std::string& s, const BoundArgs& a, bool prefix) {
  const char* fn = prefix ? "startswith" : "endswith";
  std::string text = s;
  if (a.get(1) || a.get(2))
    text = slice(Value(s), a.get_or(1, Value::none()), a.get_or(2, Value::none()), Value::none()).str();
  auto match = [&](const Value& v) {
    const std::string& x = str_arg(&v, fn);
    if (x.size() > text.size()) return false;
    return prefix ? text.compare(0, x.size(), x) == 0 : text.compare(text.size() - x.size(), x.size(), x) == 0;
  };
  const Value* p = a.get(0);
  if (p && p->is_list() && p->flavor() == Flavor::Tuple) {
    for (const Value& v : p->items())
      if (match(v)) return true;
    return false;
  }
  if (!p || !p->is_string()) fail("{} first arg must be str or a tuple of str", fn);
  return match(*p);
}

Value list_of_strings(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

Value str_method(const std::string& s, const std::string& name, const CallArgs& args) {
  auto bind = [&](std::initializer_list<const char*> params) { return BoundArgs("str." + name, args, params); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const BoundArgs a = bind({"chars"});
    const pystr::Side side = name == "strip" ? pystr::Side::Both : name == "lstrip" ? pystr::Side::Left : pystr::Side::Right;
    return pystr::strip(s, side, optional_str(a.get(0), name.c_str()));
  }
  if (name == "split" || name == "rsplit") {
    const BoundArgs a = bind({"sep", "maxsplit"});
    return list_of_strings(
        pystr::split(s, optional_str(a.get(0), "sep"), int_arg(a.get(1), -1, name.c_str()), name == "rsplit"));
  }
  if (name == "splitlines") {
    const BoundArgs a = bind({"keepends"});
    if (a.get(0) && truthy(*a.get(0))) fail("str.splitlines(keepends=True) is not supported");
    return list_of_strings(pystr::splitlines(s));
  }
  if (name == "startswith" || name == "endswith") {
    const BoundArgs a = bind({"prefix", "start", "end"});
    return affix_match(s, a, name == "startswith");
  }
  if (name == "replace") {
    const BoundArgs a = bind({"old", "new", "count"});
    return pystr::replace(s, str_arg(a.get(0), "replace"), str_arg(a.get(1), "replace"), int_arg(a.get(2), -1, "replace"));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind({});  // no arguments
    const std::string what = "str." + name + "()";
    if (name == "upper") return pystr::upper(s, what.c_str());
    if (name == "lower") return pystr::lower(s, what.c_str());
    if (name == "title") return pystr::title(s, what.c_str());
    return pystr::capitalize(s, what.c_str());
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const BoundArgs a = bind({"affix"});
    const std::string& x = str_arg(a.get(0), name.c_str());
    if (name == "removeprefix") return s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s;
    return x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 ? s.substr(0, s.size() - x.size()) : s;
  }
  if (name == "find" || name == "count") {
    const BoundArgs a = bind({"sub"});
    const std::string& sub = str_arg(a.get(0), name.c_str());
    if (name == "find") {
      const size_t hit = pystr::find(s, sub);
      return hit == std::string::npos ? int64_t(-1) : int64_t(pystr::length(std::string_view(s).substr(0, hit)));
    }
    if (sub.empty()) return int64_t(pystr::length(s) + 1);
    int64_t n = 0;
    for (size_t p = pystr::find(s, sub); p != std::string::npos; p = pystr::find(s, sub, p + sub.size())) ++n;
    return n;
  }
  if (name == "join") {
    const BoundArgs a = bind({"iterable"});
    if (!a.get(0)) fail("str.join() takes exactly one argument (0 given)");
    std::string out;
    const std::vector<Value> items = iterate(*a.get(0));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        fail("sequence item {}: expected str instance, {} found", i, type_name(items[i]));
      if (i) out += s;
      out += items[i].str();
      check_size(out.size());
    }
    return out;
  }
  return unsupported_method("str", name).call(args);
}

Value dict_method(const Value& d, const std::string& name, const CallArgs& args) {
  const BoundArgs a("dict." + name, args, name == "get" ? std::initializer_list<const char*>{"key", "default"}
                                                        : std::initializer_list<const char*>{});
  if (name == "get") {
    if (!a.get(0)) fail("get expected at least 1 argument, got 0");
    const Value* hit = a.get(0)->is_string() ? d.dict().find(a.get(0)->str()) : nullptr;
    return hit ? *hit : a.get_or(1, Value::none());
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict().entries()) {
    if (name == "keys") out.emplace_back(k);
    if (name == "values") out.push_back(v);
    if (name == "items") out.push_back(Value::list({Value(k), v}, Flavor::Tuple));
  }
  return Value::list(std::move(out), name == "keys" ? Flavor::DictKeys : name == "values" ? Flavor::DictValues
                                                                                         : Flavor::DictItems);
}

using Method = Value (*)(const Value& self, const std::string& name, const CallArgs& args);

Value bound(const Value& object, const std::string& name, Method method) {
  return Value::callable(name, [object, name, method](const CallArgs& args) { return method(object, name, args); });
}

Value loop_attribute(const Value& loop, const std::string& name) {
  const LoopInfo& l = loop.loop();
  if (name == "index") return l.index0 + 1;
  if (name == "index0") return l.index0;
  if (name == "revindex") return l.length - l.index0;
  if (name == "revindex0") return l.length - l.index0 - 1;
  if (name == "first") return l.index0 == 0;
  if (name == "last") return l.index0 == l.length - 1;
  if (name == "length") return l.length;
  // depth counts recursive-loop levels, not nesting; recursive loops are not supported, so it is always 1.
  if (name == "depth") return int64_t(1);
  if (name == "depth0") return int64_t(0);
  if (name == "previtem") return l.index0 > 0 ? l.previtem : Value::undefined("there is no previous item");
  if (name == "nextitem") return l.index0 < l.length - 1 ? l.nextitem : Value::undefined("there is no next item");
  if (name == "cycle") {
    const int64_t index0 = l.index0;
    return Value::callable("loop.cycle", [index0](const CallArgs& args) {
      if (args.positional.empty()) fail("no items for cycling given");
      return args.positional[size_t(index0 % int64_t(args.positional.size()))];
    });
  }
  if (name == "changed") return unsupported_method("loop", name);
  return missing_attribute(loop, name);
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) object.fail_undefined();
  // Dunder attributes exist on every Python object and the sandbox refuses them all.
  if (name.size() > 4 && name.starts_with("__") && name.ends_with("__")) return unsafe(object, name);
  switch (object.kind()) {
    case Kind::String:
      if (in(kStrMethods, name))
        return bound(object, name, [](const Value& o, const std::string& n, const CallArgs& a) {
          return str_method(o.str(), n, a);
        });
      break;
    case Kind::Dict:
      if (in(kDictMutators, name)) return unsafe(object, name);
      if (name == "get" || name == "items" || name == "keys" || name == "values") return bound(object, name, dict_method);
      if (in(kDictMethods, name)) return unsupported_method("dict", name);
      if (const Value* v = object.dict().find(name)) return *v;
      break;
    case Kind::List:
      if (object.flavor() == Flavor::List && in(kListMutators, name)) return unsafe(object, name);
      if (object.flavor() == Flavor::List && in(kListMethods, name)) return unsupported_method("list", name);
      if ((object.flavor() == Flavor::Tuple || object.flavor() == Flavor::Range) && in(kTupleMethods, name))
        return unsupported_method(type_name(object), name);
      break;
    case Kind::Namespace:
      if (const Value* v = object.dict().find(name)) return *v;
      break;
    case Kind::Loop: return loop_attribute(object, name);
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
      if (in(kNumberAttributes, name)) return unsupported_method(type_name(object), name);
      break;
    default: break;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) object.fail_undefined();
  if (key.is_integral()) {
    const bool indexable = object.is_string() || (object.is_list() && (object.flavor() == Flavor::List ||
                                                                         object.flavor() == Flavor::Tuple ||
                                                                         object.flavor() == Flavor::Range));
    if (indexable) {
      const int64_t n = object.is_string() ? int64_t(pystr::length(object.str())) : int64_t(object.items().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        if (!object.is_string()) return object.items()[size_t(i)];
        return slice(object, Value(i), Value(i + 1), Value::none());
      }
    }
  }
  if (key.is_string()) {
    if (object.is_dict()) {
      if (const Value* v = object.dict().find(key.str())) return *v;
    }
    return get_attribute(object, key.str());  // Jinja falls back to the attribute for string keys
  }
  return Value::undefined(object_description(object) + " has no element " + repr(key));
}

}  // namespace tessera::chat
