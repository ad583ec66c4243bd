// A JSON Schema validator for the tests, written from the specification independently of the grammar compiler:
// it checks instances, not text, so that "every random walk through the mask yields a valid document" is
// checked by something other than the code that built the grammar. Covers the keywords the compiler supports;
// patterns through std::regex (ASCII patterns only), formats by parsing the values.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>
#include <string>

namespace tessera::testing {

using nlohmann::ordered_json;

inline int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool all_digits(const std::string& s, size_t pos, size_t n) {
  if (pos + n > s.size()) return false;
  for (size_t i = pos; i < pos + n; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

inline bool valid_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !all_digits(s, 0, 4) || !all_digits(s, 5, 2) ||
      !all_digits(s, 8, 2))
    return false;
  const int y = std::stoi(s.substr(0, 4)), m = std::stoi(s.substr(5, 2)), d = std::stoi(s.substr(8, 2));
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

inline bool valid_time(const std::string& s) {
  static const std::regex re("([0-9]{2}):([0-9]{2}):([0-9]{2})(\\.[0-9]+)?(Z|[+-]([0-9]{2}):([0-9]{2}))");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 59) return false;
  return m[5] == "Z" || (std::stoi(m[6]) <= 23 && std::stoi(m[7]) <= 59);
}

inline bool valid_format(const std::string& format, const std::string& s) {
  if (format == "date") return valid_date(s);
  if (format == "time") return valid_time(s);
  if (format == "date-time") return s.size() > 11 && s[10] == 'T' && valid_date(s.substr(0, 10)) && valid_time(s.substr(11));
  if (format == "uuid") return std::regex_match(s, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
  if (format == "ipv4") {
    std::smatch m;
    if (!std::regex_match(s, m, std::regex("(\\d+)\\.(\\d+)\\.(\\d+)\\.(\\d+)"))) return false;
    for (int i = 1; i <= 4; ++i)
      if (m[i].length() > 3 || std::stoi(m[i]) > 255 || (m[i].length() > 1 && m[i].str()[0] == '0')) return false;
    return true;
  }
  return false;  // the tests only use the formats above here (the rest are checked by ajv-formats end to end)
}

class SchemaCheck {
 public:
  explicit SchemaCheck(const ordered_json& root) : root_(root) {}

  // Empty when `v` is valid; otherwise why not.
  std::string check(const ordered_json& v) const { return check(v, root_, "#"); }

 private:
  static bool has_type(const ordered_json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    return false;
  }

  std::string check(const ordered_json& v, const ordered_json& s, const std::string& at) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": false schema";
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      return check(v, root_.at(ordered_json::json_pointer(ref.substr(1))), ref);
    }
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found = found || e == v;
      if (!found) return at + ": not in the enum";
    }
    if (s.contains("anyOf")) {
      for (const auto& sub : s["anyOf"])
        if (check(v, sub, at).empty()) return "";
      return at + ": no anyOf branch matches";
    }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"])
        if (auto e = check(v, sub, at); !e.empty()) return e;
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) ok = has_type(v, s["type"]);
      else for (const auto& t : s["type"]) ok = ok || has_type(v, t);
      if (!ok) return at + ": wrong type " + std::string(v.type_name());
    }
    if (v.is_object()) {
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (s.contains("properties") && s["properties"].contains(it.key())) {
          if (auto e = check(it.value(), s["properties"][it.key()], at + "/" + it.key()); !e.empty()) return e;
        } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
          return at + ": additional property " + it.key();
        }
      }
    }
    if (v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return at + ": too few items";
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return at + ": too many items";
      if (s.contains("items"))
        for (size_t i = 0; i < v.size(); ++i)
          if (auto e = check(v[i], s["items"], at + "/" + std::to_string(i)); !e.empty()) return e;
    }
    if (v.is_string()) {
      const std::string str = v.get<std::string>();
      if (s.contains("minLength") && code_points(str) < s["minLength"].get<int64_t>()) return at + ": too short";
      if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<int64_t>()) return at + ": too long";
      if (s.contains("pattern") && !std::regex_search(str, std::regex(s["pattern"].get<std::string>())))
        return at + ": pattern mismatch '" + str + "'";
      if (s.contains("format") && !valid_format(s["format"], str)) return at + ": bad " + s["format"].get<std::string>();
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      if (s.contains("minimum") && x < s["minimum"].get<double>()) return at + ": below minimum";
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return at + ": above maximum";
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return at + ": not above";
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return at + ": not below";
    }
    return "";
  }

  const ordered_json& root_;
};

}  // namespace tessera::testing
