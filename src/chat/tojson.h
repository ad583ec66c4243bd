// Python's json.dumps over template values: Hugging Face replaces Jinja's tojson filter with
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False), so the JSON a template prints
// (tool schemas, tool-call arguments) must match Python's spacing, escaping and number formatting byte for byte.
#pragma once

#include <optional>
#include <string>

#include "chat/value.h"

namespace tessera::chat {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // absent: one line; else the text repeated per nesting level
  std::optional<std::string> item_separator, key_separator;  // absent: Python's defaults for the indent mode
  bool sort_keys = false;
};

// Throws Error ("Object of type X is not JSON serializable") for values JSON cannot hold.
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

}  // namespace tessera::chat
