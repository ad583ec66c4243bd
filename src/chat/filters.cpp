// Jinja's built-in filters that chat templates use, each written to return what jinja2's own does (the
// function it mirrors is named beside it), with Hugging Face's tojson in place of Jinja's.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "chat/builtins.h"
#include "chat/operators.h"
#include "chat/work_budget.h"
#include "chat/pystr.h"
#include "chat/tojson.h"
#include "chat/unicode_tables.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

Value generator(std::vector<Value> items) { return Value::list(std::move(items), Flavor::Generator); }

// An integer indent (tojson's, indent's width): that many spaces, none for n <= 0, refused past the string limit.
std::string spaces(int64_t n) {
  const size_t count = size_t(std::max<int64_t>(0, n));
  check_size(count);
  return std::string(count, ' ');
}

// make_attrgetter: "a.b.0" looks up a, then b, then the item 0, each the way x[key] does.
Value lookup_path(const Value& item, const Value& path, const Value* fallback) {
  Value v = item;
  if (path.is_integral()) {
    v = get_item(v, path);
  } else {
    const std::string spec = to_str(path);
    for (const std::string& part : pystr::split(spec, std::string("."), -1)) {
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      v = get_item(v, digits ? Value(int64_t(std::strtoll(part.c_str(), nullptr, 10))) : Value(part));
      if (fallback && v.is_undefined()) v = *fallback;
    }
  }
  return v;
}

Value filter_trim(const Value& v, const CallArgs& args) {  // do_trim
  const BoundArgs a("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (a.get(0) && !a.get(0)->is_none()) chars = to_str(*a.get(0));
  return pystr::strip(to_str(v), pystr::Side::Both, chars);
}

Value filter_length(const Value& v, const CallArgs& args) {  // len
  BoundArgs("length", args, {});
  return length(v);
}

Value filter_tojson(const Value& v, const CallArgs& args) {  // Hugging Face's tojson: json.dumps
  const BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.get(0) && truthy(*a.get(0));
  if (const Value* indent = a.get(1); indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->str();
    } else if (indent->is_integral()) {
      o.indent = spaces(indent->as_int());
    } else {
      fail("tojson: indent must be None, an integer or a string");
    }
  }
  if (const Value* sep = a.get(2); sep && !sep->is_none()) {
    const std::vector<Value> parts = iterate(*sep);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      fail("tojson: separators must be a pair of strings");
    o.item_separator = parts[0].str();
    o.key_separator = parts[1].str();
  }
  o.sort_keys = a.get(3) && truthy(*a.get(3));
  return json_dumps(v, o);
}

Value filter_first(const Value& v, const CallArgs& args) {  // do_first
  BoundArgs("first", args, {});
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(const Value& v, const CallArgs& args) {  // do_last: next(iter(reversed(seq)))
  BoundArgs("last", args, {});
  if (v.is_list() && v.flavor() == Flavor::Generator) fail("'generator' object is not reversible");
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_join(const Value& v, const CallArgs& args) {  // sync_do_join without autoescape
  const BoundArgs a("join", args, {"d", "attribute"});
  const std::string sep = to_str(a.get_or(0, Value(std::string())));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(a.get(1) && !a.get(1)->is_none() ? lookup_path(item, *a.get(1), nullptr) : item);
    if (out.size() > kMaxStringBytes) fail("join: the result would be larger than {} bytes", kMaxStringBytes);
  }
  return out;
}

Value filter_default(const Value& v, const CallArgs& args) {  // do_default
  const BoundArgs a("default", args, {"default_value", "boolean"});
  const bool boolean = a.get(1) && truthy(*a.get(1));
  if (v.is_undefined() || (boolean && !truthy(v))) return a.get_or(0, Value(std::string()));
  return v;
}

Value filter_upper(const Value& v, const CallArgs& args) {
  BoundArgs("upper", args, {});
  return pystr::upper(to_str(v), "the upper filter");
}

Value filter_lower(const Value& v, const CallArgs& args) {
  BoundArgs("lower", args, {});
  return pystr::lower(to_str(v), "the lower filter");
}

Value filter_capitalize(const Value& v, const CallArgs& args) {
  BoundArgs("capitalize", args, {});
  return pystr::capitalize(to_str(v), "the capitalize filter");
}

// do_title: every word that follows a run of -, white space, (, {, [ or < starts upper-case, the rest lower.
Value filter_title(const Value& v, const CallArgs& args) {
  BoundArgs("title", args, {});
  const std::u32string s = pystr::decode(pystr::lower(to_str(v), "the title filter"));
  auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_space(c);
  };
  std::u32string out;
  bool word_start = true;
  for (char32_t c : s) {
    const bool sep = separator(c);
    out.push_back(word_start && !sep && c >= 'a' && c <= 'z' ? c - 32 : c);
    word_start = sep;
  }
  return pystr::encode(out);
}

Value filter_replace(const Value& v, const CallArgs& args) {  // do_replace without autoescape
  const BoundArgs a("replace", args, {"old", "new", "count"});
  if (!a.get(0) || !a.get(1)) fail("replace() needs the old and new strings");
  const Value* count = a.get(2);
  if (count && !count->is_none() && !count->is_integral()) fail("replace: count must be an integer");
  return pystr::replace(to_str(v), to_str(*a.get(0)), to_str(*a.get(1)),
                        count && !count->is_none() ? count->as_int() : -1);
}

Value filter_items(const Value& v, const CallArgs& args) {  // do_items
  BoundArgs("items", args, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries()) out.push_back(Value::list({Value(k), x}, Flavor::Tuple));
  return generator(std::move(out));
}

Value filter_list(const Value& v, const CallArgs& args) {
  BoundArgs("list", args, {});
  return Value::list(iterate(v));
}

Value filter_string(const Value& v, const CallArgs& args) {  // soft_str
  BoundArgs("string", args, {});
  return to_str(v);
}

// float(str): Python accepts surrounding white space, inf/nan spellings and a sign; anything else is a
// ValueError, which the int and float filters turn into their default.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = pystr::strip(text, pystr::Side::Both);
  if (s.empty() || s.find('_') != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  const bool hex = s.find_first_of("xX") != std::string::npos;  // strtod reads hex floats, Python does not
  if (hex) return std::nullopt;
  return d;
}

Value filter_int(const Value& v, const CallArgs& args) {  // do_int
  const BoundArgs a("int", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value(int64_t(0)));
  if (v.is_undefined()) v.fail_undefined();  // Undefined.__int__ raises, and do_int does not catch it
  const int64_t base = a.get(1) && a.get(1)->is_integral() ? a.get(1)->as_int() : 10;
  if (v.is_integral()) return v.as_int();
  if (v.kind() == Kind::Float) {
    if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return fallback;
    return int64_t(v.as_float());  // truncates toward zero, as int() does
  }
  if (!v.is_string()) return fallback;
  const std::string s = pystr::strip(v.str(), pystr::Side::Both);
  if (base == 10 && !s.empty() && s.find('_') == std::string::npos) {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() + s.size() && errno != ERANGE) return int64_t(x);
  } else if (base != 10) {
    fail("the int filter with base {} is not supported", base);
  }
  if (const std::optional<double> d = parse_float(s); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
    return int64_t(*d);
  return fallback;
}

Value filter_float(const Value& v, const CallArgs& args) {  // do_float
  const BoundArgs a("float", args, {"default"});
  const Value fallback = a.get_or(0, Value(0.0));
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_number()) return v.as_float();
  if (!v.is_string()) return fallback;
  const std::optional<double> d = parse_float(v.str());
  return d ? Value(*d) : fallback;
}

Value filter_abs(const Value& v, const CallArgs& args) {
  BoundArgs("abs", args, {});
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value(v.as_int());
  if (v.kind() == Kind::Float) return std::fabs(v.as_float());
  fail("bad operand type for abs(): '{}'", type_name(v));
}

Value filter_reverse(const Value& v, const CallArgs& args) {  // do_reverse
  BoundArgs("reverse", args, {});
  if (v.is_string()) return slice(v, Value::none(), Value::none(), Value(int64_t(-1)));
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator; a generator is not reversible, so Jinja builds a list instead.
  const bool from_generator = v.is_list() && v.flavor() == Flavor::Generator;
  return Value::list(std::move(items), from_generator ? Flavor::List : Flavor::Generator);
}

Value filter_indent(const Value& v, const CallArgs& args) {  // do_indent
  const BoundArgs a("indent", args, {"width", "first", "blank"});
  const Value width = a.get_or(0, Value(int64_t(4)));
  if (!width.is_string() && !width.is_integral()) fail("indent: width must be an integer or a string");
  const std::string indention = width.is_string() ? width.str() : spaces(width.as_int());
  const bool first = a.get(1) && truthy(*a.get(1)), blank = a.get(2) && truthy(*a.get(2));
  // do_indent starts with `s += "\n"` on the value itself: only a str gets through.
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_list() && v.flavor() == Flavor::List) fail("'list' object has no attribute 'splitlines'");
  if (!v.is_string()) fail("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v));
  std::vector<std::string> lines = pystr::splitlines(v.str() + "\n");
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      out += (i ? "\n" + indention : std::string()) + lines[i];
      check_size(out.size());
    }
  } else {
    out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n" + (lines[i].empty() ? std::string() : indention) + lines[i];
      check_size(out.size());
    }
  }
  if (!first) return out;
  check_size(indention.size() + out.size());
  return indention + out;
}

// select / reject / selectattr / rejectattr: the item (or its attribute) run through a test, or its truth.
Value select_or_reject(const Value& v, const CallArgs& args, bool lookup_attr, bool keep, const char* name) {
  if (lookup_attr && args.positional.empty()) fail("{}() needs the attribute to look up", name);
  const size_t off = lookup_attr ? 1 : 0;
  TestFn test = nullptr;
  CallArgs test_args;
  test_args.keyword = args.keyword;
  if (args.positional.size() > off) {
    const Value& test_name = args.positional[off];
    if (!test_name.is_string()) fail("{}(): the test name must be a string", name);
    test = find_test(test_name.str());
    if (!test) fail("no test named '{}'", test_name.str());
    test_args.positional.assign(args.positional.begin() + off + 1, args.positional.end());
  }
  std::vector<Value> out;
  if (!truthy(v)) return generator({});  // Jinja skips a false value without iterating it
  for (const Value& item : iterate(v)) {
    const Value subject = lookup_attr ? lookup_path(item, args.positional[0], nullptr) : item;
    const bool pass = test ? test(subject, test_args) : truthy(subject);
    if (pass == keep) out.push_back(item);
  }
  return generator(std::move(out));
}

Value filter_select(const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, true, "select"); }
Value filter_reject(const Value& v, const CallArgs& a) { return select_or_reject(v, a, false, false, "reject"); }
Value filter_selectattr(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, true, "selectattr"); }
Value filter_rejectattr(const Value& v, const CallArgs& a) { return select_or_reject(v, a, true, false, "rejectattr"); }

Value filter_map(const Value& v, const CallArgs& args) {  // sync_do_map
  std::vector<Value> out;
  if (!truthy(v)) return generator({});  // Jinja skips a false value without iterating it
  if (args.positional.empty()) {
    const BoundArgs a("map", args, {"attribute", "default"});
    if (!a.get(0)) fail("map() needs a filter name or attribute=");
    for (const Value& item : iterate(v)) out.push_back(lookup_path(item, *a.get(0), a.get(1)));
    return generator(std::move(out));
  }
  if (!args.positional[0].is_string()) fail("map(): the filter name must be a string");
  const FilterFn f = find_filter(args.positional[0].str());
  if (!f) fail("no filter named '{}'", args.positional[0].str());
  CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
  for (const Value& item : iterate(v)) out.push_back(f(item, rest));
  return generator(std::move(out));
}

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", filter_abs},         {"capitalize", filter_capitalize}, {"count", filter_length},
    {"d", filter_default},       {"default", filter_default},       {"first", filter_first},
    {"float", filter_float},     {"indent", filter_indent},         {"int", filter_int},
    {"items", filter_items},     {"join", filter_join},             {"last", filter_last},
    {"length", filter_length},   {"list", filter_list},             {"lower", filter_lower},
    {"map", filter_map},         {"reject", filter_reject},         {"rejectattr", filter_rejectattr},
    {"replace", filter_replace}, {"reverse", filter_reverse},       {"select", filter_select},
    {"selectattr", filter_selectattr}, {"string", filter_string},   {"title", filter_title},
    {"tojson", filter_tojson},   {"trim", filter_trim},             {"upper", filter_upper},
};

constexpr std::string_view kJinjaFilters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join", "last",
    "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr", "replace", "reverse",
    "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags", "sum", "title", "tojson", "trim",
    "truncate", "unique", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const NamedFilter& f : kFilters)
    if (f.name == name) return f.fn;
  return nullptr;
}

bool is_jinja_filter(std::string_view name) {
  return std::find(std::begin(kJinjaFilters), std::end(kJinjaFilters), name) != std::end(kJinjaFilters);
}

}  // namespace tessera::chat
