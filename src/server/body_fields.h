// Reading a request body's fields the way every route does: absent and null both mean "not given" (OpenAI
// clients send null for unset options), and a bad value is a 400 that names its field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "server/errors.h"

namespace tessera::server::body_fields {

[[noreturn]] inline void bad(const std::string& param, const std::string& what) {
  throw ApiException(ErrorCode::InvalidRequest, "'" + param + "' " + what, param);
}

// json or ordered_json (structured output keeps the key order of schemas and tools).
template <typename Json>
const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

inline bool read_bool(const nlohmann::json& v, const char* name) {
  if (!v.is_boolean()) bad(name, "must be a boolean");
  return v.get<bool>();
}

}  // namespace tessera::server::body_fields
