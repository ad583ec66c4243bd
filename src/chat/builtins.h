// What a template can call by name: filters (x | trim), tests (x is string), the methods of str and dict
// (x.strip()), and Hugging Face's globals (raise_exception, strftime_now) beside Jinja's (namespace, range).
// Each is written to return what Python's jinja2 returns; anything Jinja has that is not here is reported as
// unsupported by name instead of being guessed.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace tessera::chat {

using FilterFn = Value (*)(const Value& value, const CallArgs& args);
using TestFn = bool (*)(const Value& value, const CallArgs& args);

// Null when the name is not a supported filter / test. The parser resolves names once, as Jinja's compiler
// does, so a template naming an unsupported one fails when it is loaded.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// Whether Jinja itself has a filter / test of this name (to tell "unsupported" from "unknown").
bool is_jinja_filter(std::string_view name);
bool is_jinja_test(std::string_view name);

// Jinja's sandboxed attribute access (x.name) and subscription (x[key]): methods of str / dict / list, dict
// keys, namespace and loop attributes; a miss is an Undefined that says what was missing.
Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);

// The globals every render sees: range, namespace, dict, and Hugging Face's raise_exception and
// strftime_now (local time from `now`). Every namespace() the render creates is appended to `namespaces` (which
// must outlive the render): a namespace can be made to hold itself, and the interpreter breaks such reference
// cycles by emptying them all when the render ends.
using Clock = std::function<std::chrono::system_clock::time_point()>;
Dict make_globals(const Clock& now, std::vector<Value>& namespaces);

// Binds call arguments to named parameters the way Python does (positionally, then by keyword) and reports
// what Python would: too many arguments, an unknown keyword, a parameter given twice.
class BoundArgs {
 public:
  BoundArgs(std::string_view function, const CallArgs& args, std::initializer_list<const char*> params);
  const Value* get(size_t i) const { return i < values_.size() && present_[i] ? &values_[i] : nullptr; }
  Value get_or(size_t i, Value fallback) const { return get(i) ? *get(i) : std::move(fallback); }

 private:
  std::vector<Value> values_;
  std::vector<bool> present_;
};

}  // namespace tessera::chat
