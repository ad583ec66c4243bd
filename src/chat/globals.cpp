// The functions a template can call by name, and Python-style argument binding for every builtin.
#include <ctime>

#include "chat/builtins.h"
#include "chat/errors.h"
#include "core/error.h"

namespace tessera::chat {
namespace {

// Jinja's sandbox refuses longer ranges (MAX_RANGE), so a template cannot build a huge list.
constexpr int64_t kMaxRange = 100000;

Value make_range(const CallArgs& args) {  // safe_range
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3)
    fail("range expected at most 3 arguments, got {}", args.positional.size());
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& a = args.positional[i];
    if (!a.is_integral()) fail("'{}' object cannot be interpreted as an integer", type_name(a));
    v[args.positional.size() == 1 ? 1 : i] = a.as_int();
  }
  if (v[2] == 0) fail("range() arg 3 must not be zero");
  const long double n = (static_cast<long double>(v[1]) - v[0]) / v[2];
  if (n > kMaxRange) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  return Value::range(v[0], v[1], v[2]);
}

// dict(mapping, **kwargs), which is also how Jinja's namespace() takes its initial attributes.
Dict make_dict(const CallArgs& args, const char* function) {
  Dict d;
  if (args.positional.size() > 1) fail("{} expected at most 1 argument, got {}", function, args.positional.size());
  if (!args.positional.empty()) {
    const Value& m = args.positional[0];
    if (m.is_dict()) {
      d = m.dict();
    } else {
      for (const Value& pair : iterate(m)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length {}; 2 is required", kv.size());
        if (!kv[0].is_string()) fail("{}: only string keys are supported", function);
        d.set(kv[0].str(), kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(k, v);
  return d;
}

// datetime.now().strftime(fmt): Python formats %f (microseconds) itself and prints nothing for %z and %Z of a
// naive datetime; everything else is the C library's strftime, as in CPython on Linux.
std::string py_strftime(const std::string& format, std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[++i];
      if (c == 'f') {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros < 0 ? micros + 1000000 : micros));
        fmt += buf;
      } else if (c != 'z' && c != 'Z') {
        fmt += '%';
        fmt += c;
      }
    } else {
      fmt += format[i];
    }
  }
  if (fmt.empty()) return {};
  // strftime returns 0 both for "did not fit" and for an empty result: grow a few times, then accept empty.
  for (size_t size = 256; size <= (size_t(1) << 20); size *= 4) {
    std::string out(size, '\0');
    const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
    if (n > 0) return out.substr(0, n);
  }
  return {};
}

Value unsupported_global(const std::string& name) {
  return Value::callable(name, [name](const CallArgs&) -> Value {
    fail("the global function '{}' is not supported by the chat template interpreter", name);
  });
}

}  // namespace

BoundArgs::BoundArgs(std::string_view function, const CallArgs& args, std::initializer_list<const char*> params)
    : values_(params.size()), present_(params.size(), false) {
  if (args.positional.size() > params.size())
    fail("{}() takes at most {} argument(s) ({} given)", function, params.size(), args.positional.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    present_[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (const char* p : params) {
      if (name == p) break;
      ++i;
    }
    if (i == params.size()) fail("{}() got an unexpected keyword argument '{}'", function, name);
    if (present_[i]) fail("{}() got multiple values for argument '{}'", function, name);
    values_[i] = value;
    present_[i] = true;
  }
}

Dict make_globals(const Clock& now, std::vector<Value>& namespaces) {
  Dict g;
  g.set("range", Value::callable("range", make_range));
  g.set("dict", Value::callable("dict", [](const CallArgs& a) { return Value::dict(make_dict(a, "dict")); }));
  g.set("namespace", Value::callable("namespace", [&namespaces](const CallArgs& a) {
          namespaces.push_back(Value::make_namespace(make_dict(a, "namespace")));
          return namespaces.back();
        }));
  g.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& args) -> Value {
          const BoundArgs a("raise_exception", args, {"message"});
          throw RaisedError(0, a.get(0) ? to_str(*a.get(0)) : std::string("None"));
        }));
  g.set("strftime_now", Value::callable("strftime_now", [now](const CallArgs& args) -> Value {
          const BoundArgs a("strftime_now", args, {"format"});
          if (!a.get(0) || !a.get(0)->is_string()) fail("strftime() argument 1 must be str");
          return py_strftime(a.get(0)->str(), now ? now() : std::chrono::system_clock::now());
        }));
  for (const char* name : {"cycler", "joiner", "lipsum"}) g.set(name, unsupported_global(name));
  return g;
}

}  // namespace tessera::chat
