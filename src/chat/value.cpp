// Values and the Python semantics every operation builds on: truth, equality, str()/repr(), iteration, len().
#include "chat/value.h"

#include <algorithm>

#include "chat/pystr.h"
#include "chat/work_budget.h"
#include "core/check.h"
#include "core/error.h"
#include "core/utf8.h"

namespace tessera::chat {
namespace {

struct ListData {
  std::vector<Value> items;
  Flavor flavor;
  int64_t range_args[3] = {0, 0, 1};  // Range only: start, stop, step (what repr() prints)
};

struct CallableData {
  std::string name;
  Function fn;
};

int child_depth(const Dict& d) {
  int depth = 0;
  for (const auto& [_, v] : d.entries()) depth = std::max(depth, v.depth());
  return depth;
}

// Counts the recursion of printing and comparing: a namespace can be made to contain itself
// (`set ns.x = [ns]`), which Python would print as [...] and this refuses instead of recursing forever.
class NestingGuard {
 public:
  NestingGuard() {
    if (++level_ > kMaxNesting) {
      --level_;
      fail("values nested deeper than {} levels (or containing themselves) are not supported", kMaxNesting);
    }
  }
  ~NestingGuard() { --level_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  static thread_local int level_;
};

thread_local int NestingGuard::level_ = 0;

const char* flavor_name(Flavor f) {
  switch (f) {
    case Flavor::List: return "list";
    case Flavor::Tuple: return "tuple";
    case Flavor::Range: return "range";
    case Flavor::Generator: return "generator";
    case Flavor::DictKeys: return "dict_keys";
    case Flavor::DictValues: return "dict_values";
    case Flavor::DictItems: return "dict_items";
  }
  return "list";
}

std::string join_repr(const std::vector<Value>& items) {
  const NestingGuard guard;
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
    check_size(out.size());  // ['x' * 10**7] * 1000 prints 10 GB
  }
  return out;
}

std::string dict_repr(const Dict& d) {
  const NestingGuard guard;
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += pystr::repr(k) + ": " + repr(v);
    check_size(out.size());
  }
  return out + "}";
}

// Python compares int and float exactly; converting a large int to double first could call unequal values
// equal, so compare in long double (64-bit mantissa on x86: every int64 is exact).
bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  const long double x = a.kind() == Kind::Float ? a.as_float() : static_cast<long double>(a.as_int());
  const long double y = b.kind() == Kind::Float ? b.as_float() : static_cast<long double>(b.as_int());
  return x == y;
}

bool contains_equal(const std::vector<Value>& items, const Value& x) {
  charge_work(items.size());
  for (const Value& v : items)
    if (equals(v, x)) return true;
  return false;
}

template <typename Json>
Value json_to_value(const Json& j, int depth) {
  if (depth > kMaxNesting) fail("JSON nested deeper than {} levels is not supported", kMaxNesting);
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) fail("integer {} is too large for the chat template (64-bit integers)", u);
      return Value(int64_t(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(json_to_value(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), json_to_value(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: fail("unsupported JSON value in the chat template context");
  }
}

const std::string kGenericUndefined = "undefined value";



}  // namespace

// ---- Value ----

Value::Value() : kind_(Kind::Undefined), i_(0) {}

Value Value::undefined(std::string message) {
  Value v;
  v.ptr_ = std::make_shared<std::string>(std::move(message));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value::Value(bool b) : kind_(Kind::Bool), i_(0) { b_ = b; }
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double f) : kind_(Kind::Float), f_(f) {}
Value::Value(std::string s) : kind_(Kind::String), i_(0) {
  charge_bytes(s.size());
  ptr_ = std::make_shared<std::string>(std::move(s));
}

Value Value::list(std::vector<Value> items, Flavor flavor) {
  charge_work(items.size());
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  return shared(Kind::List, std::make_shared<ListData>(ListData{std::move(items), flavor}), depth + 1);
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  TESSERA_CHECK(step != 0);
  // len(range) as CPython computes it, in unsigned arithmetic: stop - start and start + i * step must not
  // overflow (range(2**63 - 3, 2**63 - 1, 5) is [2**63 - 3], not a wrap-around).
  const bool up = step > 0;
  const uint64_t span = up ? uint64_t(stop) - uint64_t(start) : uint64_t(start) - uint64_t(stop);
  const uint64_t stride = up ? uint64_t(step) : uint64_t(0) - uint64_t(step);
  const uint64_t n = (up ? start < stop : start > stop) ? (span - 1) / stride + 1 : 0;
  std::vector<Value> items;
  items.reserve(size_t(n));
  for (uint64_t i = 0; i < n; ++i) items.emplace_back(int64_t(uint64_t(start) + i * uint64_t(step)));
  Value v = list(std::move(items), Flavor::Range);
  int64_t* args = static_cast<ListData*>(v.ptr_.get())->range_args;
  args[0] = start;
  args[1] = stop;
  args[2] = step;
  return v;
}

Value Value::shared(Kind kind, std::shared_ptr<void> data, int depth) {
  if (depth > kMaxNesting) fail("values nested deeper than {} levels are not supported", kMaxNesting);
  Value v;
  v.kind_ = kind;
  v.ptr_ = std::move(data);
  v.depth_ = uint16_t(depth);
  return v;
}

Value Value::dict(Dict d) {
  charge_work(d.size());
  const int depth = child_depth(d) + 1;
  return shared(Kind::Dict, std::make_shared<Dict>(std::move(d)), depth);
}

Value Value::make_namespace(Dict attrs) {
  const int depth = child_depth(attrs) + 1;
  return shared(Kind::Namespace, std::make_shared<Dict>(std::move(attrs)), depth);
}

Value Value::callable(std::string name, Function fn) {
  return shared(Kind::Callable, std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)}), 0);
}

Value Value::loop(LoopInfo info) {
  const int depth = std::max(info.previtem.depth(), info.nextitem.depth()) + 1;
  return shared(Kind::Loop, std::make_shared<LoopInfo>(std::move(info)), depth);
}

const std::string& Value::str() const {
  TESSERA_DCHECK(kind_ == Kind::String);
  return *static_cast<const std::string*>(ptr_.get());
}

const std::vector<Value>& Value::items() const {
  TESSERA_DCHECK(kind_ == Kind::List);
  return static_cast<const ListData*>(ptr_.get())->items;
}

Flavor Value::flavor() const {
  TESSERA_DCHECK(kind_ == Kind::List);
  return static_cast<const ListData*>(ptr_.get())->flavor;
}

const int64_t* Value::range_args() const {
  TESSERA_DCHECK(kind_ == Kind::List);
  return static_cast<const ListData*>(ptr_.get())->range_args;
}

const Dict& Value::dict() const {
  TESSERA_DCHECK(kind_ == Kind::Dict || kind_ == Kind::Namespace);
  return *static_cast<const Dict*>(ptr_.get());
}

Dict& Value::namespace_attrs() const {
  TESSERA_DCHECK(kind_ == Kind::Namespace);
  return *static_cast<Dict*>(ptr_.get());
}

const LoopInfo& Value::loop() const {
  TESSERA_DCHECK(kind_ == Kind::Loop);
  return *static_cast<const LoopInfo*>(ptr_.get());
}

const std::string& Value::callable_name() const {
  TESSERA_DCHECK(kind_ == Kind::Callable);
  return static_cast<const CallableData*>(ptr_.get())->name;
}

Value Value::call(const CallArgs& args) const {
  TESSERA_DCHECK(kind_ == Kind::Callable);
  return static_cast<const CallableData*>(ptr_.get())->fn(args);
}

const std::string& Value::undefined_message() const {
  TESSERA_DCHECK(kind_ == Kind::Undefined);
  return ptr_ ? *static_cast<const std::string*>(ptr_.get()) : kGenericUndefined;
}

void Value::fail_undefined() const { throw Error(undefined_message()); }

// ---- Dict ----

Dict::Dict(const Dict& other) : entries_(other.entries_) {
  if (other.index_) index_ = std::make_unique<Index>(*other.index_);
}

Dict& Dict::operator=(const Dict& other) {
  if (this != &other) *this = Dict(other);
  return *this;
}

void Dict::build_index() {
  index_ = std::make_unique<Index>();
  index_->reserve(entries_.size() * 2);
  for (size_t i = 0; i < entries_.size(); ++i) index_->emplace(entries_[i].first, i);
}

const Value* Dict::find(std::string_view key) const {
  if (index_) {
    const auto it = index_->find(key);
    return it == index_->end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  if (index_) {
    if (const auto it = index_->find(key); it != index_->end()) {
      entries_[it->second].second = std::move(value);
      return;
    }
    index_->emplace(key, entries_.size());
    entries_.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : entries_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() >= kIndexFrom) build_index();
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int() != 0;
    case Kind::Float: return v.as_float() != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return v.flavor() == Flavor::Generator || !v.items().empty();  // a generator is always true
    case Kind::Dict: return !v.dict().empty();
    case Kind::Namespace:
    case Kind::Loop:
    case Kind::Callable: return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String:
      if (a.str().size() == b.str().size()) charge_bytes(a.str().size());
      return a.str() == b.str();
    case Kind::List: {
      const NestingGuard guard;
      const Flavor fa = a.flavor(), fb = b.flavor();
      if (fa != fb || fa == Flavor::Generator || fa == Flavor::DictValues) return a.identity() == b.identity();
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      charge_work(x.size());
      if (fa == Flavor::DictKeys || fa == Flavor::DictItems) {  // set-like views: equal as sets
        for (const Value& e : x)
          if (!contains_equal(y, e)) return false;
        return true;
      }
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const NestingGuard guard;
      const Dict &x = a.dict(), &y = b.dict();
      if (x.size() != y.size()) return false;
      charge_work(x.size());
      for (const auto& [k, v] : x.entries()) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::None: return "None";
    case Kind::Bool: return v.as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return pystr::float_repr(v.as_float());
    case Kind::String: return v.str();
    case Kind::List: {
      const std::vector<Value>& items = v.items();
      switch (v.flavor()) {
        case Flavor::List: return "[" + join_repr(items) + "]";
        case Flavor::Tuple: return "(" + join_repr(items) + (items.size() == 1 ? ",)" : ")");
        case Flavor::Range: {
          const int64_t* r = v.range_args();
          return "range(" + std::to_string(r[0]) + ", " + std::to_string(r[1]) +
                 (r[2] != 1 ? ", " + std::to_string(r[2]) : std::string()) + ")";
        }
        case Flavor::Generator:
          fail("printing a generator is not supported (Python prints its address); apply |list first");
        case Flavor::DictKeys:
        case Flavor::DictValues:
        case Flavor::DictItems: return std::string(flavor_name(v.flavor())) + "([" + join_repr(items) + "])";
      }
      return {};
    }
    case Kind::Dict: return dict_repr(v.dict());
    case Kind::Namespace: return "<Namespace " + dict_repr(v.dict()) + ">";
    case Kind::Loop:
      return "<LoopContext " + std::to_string(v.loop().index0 + 1) + "/" + std::to_string(v.loop().length) + ">";
    case Kind::Callable: fail("printing the function '{}' is not supported", v.callable_name());
  }
  return {};
}

std::string repr(const Value& v) {
  if (v.is_string()) return pystr::repr(v.str());
  if (v.is_undefined()) return "Undefined";
  return to_str(v);
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return flavor_name(v.flavor());
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Loop: return "LoopContext";
    case Kind::Callable: return "builtin_function_or_method";
  }
  return "object";
}

std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  if (v.kind() == Kind::Namespace) return "jinja2.utils.Namespace object";
  if (v.kind() == Kind::Loop) return "jinja2.runtime.LoopContext object";
  return type_name(v) + " object";
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return {};
    case Kind::String: {
      // One Value (and one small string) per character: the limit on list sizes keeps a long text from
      // turning into gigabytes.
      const size_t n = pystr::length(v.str());
      check_size(n * sizeof(Value));
      charge_work(n);
      std::vector<Value> out;
      const std::string& s = v.str();
      for (size_t pos = 0; pos < s.size();) {
        const size_t begin = pos;
        pos += utf8::char_length(s, pos);
        out.emplace_back(s.substr(begin, pos - begin));
      }
      return out;
    }
    case Kind::List: charge_work(v.items().size()); return v.items();
    case Kind::Dict: {
      charge_work(v.dict().size());
      std::vector<Value> keys;
      for (const auto& [k, _] : v.dict().entries()) keys.emplace_back(k);
      return keys;
    }
    default: fail("'{}' object is not iterable", type_name(v));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::String: return int64_t(pystr::length(v.str()));
    case Kind::List:
      if (v.flavor() == Flavor::Generator) break;
      return int64_t(v.items().size());
    case Kind::Dict: return int64_t(v.dict().size());
    case Kind::Loop: return v.loop().length;
    default: break;
  }
  fail("object of type '{}' has no len()", type_name(v));
}

Value from_json(const nlohmann::json& j) { return json_to_value(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return json_to_value(j, 0); }

}  // namespace tessera::chat
