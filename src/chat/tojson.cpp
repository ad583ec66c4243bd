// json.dumps, written against Python's json module behaviour (json/encoder.py semantics).
#include "chat/tojson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/pystr.h"
#include "chat/work_budget.h"
#include "core/error.h"
#include "core/utf8.h"

namespace tessera::chat {
namespace {

void append_u_escape(std::string& out, uint32_t unit) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", unit);
  out += buf;
}

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  charge_chars(s.size());
  out.push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const char b = s[pos];
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {  // printable ASCII: as it is, with or without ensure_ascii
      out.push_back(b);
      ++pos;
      continue;
    }
    const size_t begin = pos;
    const uint32_t c = utf8::decode(s, pos);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {  // ensure_ascii writes astral characters as a UTF-16 surrogate pair
        const uint32_t v = c - 0x10000;
        append_u_escape(out, 0xD800 | (v >> 10));
        append_u_escape(out, 0xDC00 | (v & 0x3FF));
      } else {
        append_u_escape(out, c);
      }
    } else {
      out.append(s, begin, pos - begin);
    }
  }
  out.push_back('"');
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o)
      : o_(o),
        item_sep_(o.item_separator ? *o.item_separator : (o.indent ? "," : ", ")),
        key_sep_(o.key_separator ? *o.key_separator : ": ") {}

  void dump(const Value& v, int level) {
    if (level > kMaxNesting) fail("values nested deeper than {} levels are not JSON serializable here", kMaxNesting);
    check_size(out_.size());  // a list repeating one long string many times
    switch (v.kind()) {
      case Kind::None: out_ += "null"; return;
      case Kind::Bool: out_ += v.as_bool() ? "true" : "false"; return;
      case Kind::Int: out_ += std::to_string(v.as_int()); return;
      case Kind::Float: {
        const double f = v.as_float();
        out_ += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : pystr::float_repr(f);
        return;
      }
      case Kind::String: dump_string(out_, v.str(), o_.ensure_ascii); return;
      case Kind::List:
        if (v.flavor() == Flavor::List || v.flavor() == Flavor::Tuple) {
          dump_array(v.items(), level);
          return;
        }
        break;
      case Kind::Dict: dump_object(v.dict(), level); return;
      default: break;
    }
    fail("Object of type {} is not JSON serializable", type_name(v));
  }

  std::string take() { return std::move(out_); }

 private:
  // Python writes "[" newline+indent item (sep newline+indent item)* newline+outer-indent "]" when indenting.
  void open(char bracket, int level) {
    out_.push_back(bracket);
    newline(level + 1);
  }
  void close(char bracket, int level) {
    newline(level);
    out_.push_back(bracket);
  }
  void newline(int level) {
    if (!o_.indent) return;
    // An indent repeats once per level on every line: [[...]] | tojson(indent=10**6) must not take gigabytes.
    check_size(out_.size() + 1 + size_t(level) * o_.indent->size());
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *o_.indent;
  }

  void dump_array(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    open('[', level);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out_ += item_sep_;
        newline(level + 1);
      }
      dump(items[i], level + 1);
    }
    close(']', level);
  }

  void dump_object(const Dict& d, int level) {
    if (d.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : d.entries()) entries.push_back(&e);
    // Python orders str keys by code point, which is UTF-8 byte order.
    if (o_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    open('{', level);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) {
        out_ += item_sep_;
        newline(level + 1);
      }
      dump_string(out_, entries[i]->first, o_.ensure_ascii);
      out_ += key_sep_;
      dump(entries[i]->second, level + 1);
    }
    close('}', level);
  }

  const JsonDumpOptions& o_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  Dumper d(options);
  d.dump(value, 0);
  return d.take();
}

}  // namespace tessera::chat
