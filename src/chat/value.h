// The values a template computes with, modelled on the Python objects Jinja would hold: Undefined, None,
// bool, int, float, str, the sequences (list, tuple, range, generators, dict views), dict, Jinja's namespace and
// loop objects, and callables. Containers are shared and immutable once built (the sandbox Hugging Face uses
// forbids mutation), so copying a Value is cheap; only a namespace is mutable, through `set ns.attr`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera::chat {

class Value;
class Dict;
struct CallArgs;
struct LoopInfo;

// Containers nest at most this deep (JSON input, template-built values; Python's own limit is its recursion
// limit): printing, comparing and freeing a value recurse once per level.
inline constexpr int kMaxNesting = 256;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Loop, Callable };

// What kind of Python sequence a List value stands for: it decides how it prints, whether it has a length,
// can be indexed and compares equal (a list never equals a tuple; a generator has no len()).
enum class Flavor : uint8_t { List, Tuple, Range, Generator, DictKeys, DictValues, DictItems };

using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  Value();  // Undefined, with the generic message
  static Value undefined(std::string message);  // `message`: what using it reports ("'x' is undefined")
  static Value none();
  Value(bool b);                          // NOLINT(google-explicit-constructor): literals read naturally
  Value(int64_t i);                       // NOLINT
  Value(int i) : Value(int64_t(i)) {}     // NOLINT
  Value(double f);                        // NOLINT
  Value(std::string s);                   // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}       // NOLINT
  static Value list(std::vector<Value> items, Flavor flavor = Flavor::List);
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(Dict d);
  static Value make_namespace(Dict attrs);
  static Value callable(std::string name, Function fn);
  static Value loop(LoopInfo info);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_int() const { return kind_ == Kind::Int; }    // not bool
  bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }  // Python: bool is an int
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? int64_t(b_) : i_; }  // Bool or Int
  double as_float() const { return kind_ == Kind::Float ? f_ : double(as_int()); }  // any number
  const std::string& str() const;                // String
  const std::vector<Value>& items() const;       // List
  Flavor flavor() const;                         // List
  const Dict& dict() const;                      // Dict
  Dict& namespace_attrs() const;                 // Namespace (mutable: `set ns.x`)
  const LoopInfo& loop() const;                  // Loop
  const std::string& callable_name() const;      // Callable
  Value call(const CallArgs& args) const;        // Callable
  const std::string& undefined_message() const;  // Undefined
  [[noreturn]] void fail_undefined() const;      // throws Error(undefined_message())
  const int64_t* range_args() const;             // Range: {start, stop, step}

  // Identity of the shared object behind a container (Python `is`); null for scalars.
  const void* identity() const { return ptr_.get(); }
  // Containers inside containers: 0 for scalars. A namespace keeps the depth it was created with.
  int depth() const { return depth_; }

 private:
  static Value shared(Kind kind, std::shared_ptr<void> data, int depth);

  Kind kind_ = Kind::Undefined;
  uint16_t depth_ = 0;
  union {
    bool b_;
    int64_t i_;
    double f_;
  };
  // String/Undefined: std::string; List: ListData; Dict/Namespace: Dict; Loop: LoopData; Callable: CallableData.
  std::shared_ptr<void> ptr_;
};

// An insertion-ordered str-keyed mapping, as Python's dict (JSON objects and template dict literals have
// string keys only). Lookups scan the handful of keys a chat template's dicts usually have; from kIndexFrom keys
// on a hash index takes over, as a client's JSON (tools, chat_template_kwargs) may hold thousands, and scanning
// them per lookup would make building and reading such a dict quadratic.
class Dict {
 public:
  Dict() = default;
  Dict(const Dict& other);
  Dict& operator=(const Dict& other);
  Dict(Dict&&) noexcept = default;
  Dict& operator=(Dict&&) noexcept = default;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces in place, or appends
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() {
    entries_.clear();
    index_.reset();
  }

 private:
  static constexpr size_t kIndexFrom = 16;
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>()(key); }
  };
  using Index = std::unordered_map<std::string, size_t, KeyHash, std::equal_to<>>;
  void build_index();

  std::vector<std::pair<std::string, Value>> entries_;
  std::unique_ptr<Index> index_;  // key -> position in entries_; only from kIndexFrom entries on
};

// Jinja's `loop` inside a for loop: the attributes are computed from these (index = index0 + 1, ...).
struct LoopInfo {
  int64_t index0 = 0;
  int64_t length = 0;
  Value previtem, nextitem;  // Undefined at the first / last item
};

// Arguments of a call, a filter or a test, positional then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// ---- Python semantics ----

bool truthy(const Value& v);                         // bool(v)
bool equals(const Value& a, const Value& b);         // a == b
std::string to_str(const Value& v);                  // str(v); Undefined prints as ""
std::string repr(const Value& v);                    // repr(v)
std::string type_name(const Value& v);               // type(v).__name__: "str", "dict", "NoneType", ...
std::string object_description(const Value& v);      // Jinja's "'dict object'" wording in undefined messages
std::vector<Value> iterate(const Value& v);          // iter(v) drained; throws for what Python cannot iterate
int64_t length(const Value& v);                      // len(v); throws for what has no len()

// JSON values as the objects json.loads would give (objects keep their key order).
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace tessera::chat
