// API key checks and the keys file format.
#include "server/auth.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/error.h"

namespace tessera::server {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

double parse_limit(std::string_view value, std::string_view what, const std::string& where) {
  double x = 0.0;
  const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || p != value.data() + value.size() || !std::isfinite(x) || x < 0.0)
    fail("{}: {} must be a number >= 0", where, what);
  return x;
}

// One entry: the key, then attributes. `where` names the entry in errors without quoting the key.
ApiKey parse_entry(std::string_view entry, const std::string& where) {
  std::istringstream words{std::string(entry)};
  ApiKey k;
  words >> k.key;
  for (std::string word; words >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) fail("{}: expected NAME=VALUE after the key, got a bare word", where);
    const std::string_view attr = std::string_view(word).substr(0, eq), value = std::string_view(word).substr(eq + 1);
    if (attr == "name") {
      if (!valid_name(value)) fail("{}: name must be 1-64 of [A-Za-z0-9._-]", where);
      k.name = std::string(value);
    } else if (attr == "priority_min") {
      int32_t p = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), p);
      if (ec != std::errc() || end != value.data() + value.size() || p < -1000000 || p > 1000000)
        fail("{}: priority_min must be an integer between -1000000 and 1000000", where);
      k.priority_min = p;
    } else if (attr == "rps") {
      k.rps = parse_limit(value, "rps", where);
    } else if (attr == "tpm") {
      k.tpm = parse_limit(value, "tpm", where);
    } else if (attr == "burst") {
      k.burst = parse_limit(value, "burst", where);
    } else {
      fail("{}: unknown attribute '{}' (name, priority_min, rps, tpm, burst)", where, attr.substr(0, 32));
    }
  }
  return k;
}

}  // namespace

RateLimits ApiKey::limits(const RateLimits& server) const {
  RateLimits l = server;
  if (rps) l.requests_per_second = *rps;
  if (tpm) l.tokens_per_minute = *tpm;
  if (burst) l.request_burst = *burst;
  return l;
}

std::vector<ApiKey> ApiKeys::parse(std::string_view text, std::string_view source, std::string_view separators) {
  std::vector<ApiKey> keys;
  size_t line = 0;
  while (!text.empty()) {
    const size_t end = text.find_first_of(separators);
    const std::string_view entry = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line;
    if (entry.empty() || entry.front() == '#') continue;
    keys.push_back(parse_entry(entry, fmt::format("{} entry {}", source, line)));
  }
  return keys;
}

std::vector<ApiKey> ApiKeys::read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read API keys file '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), "API keys file '" + path + "'");
}

ApiKeys::ApiKeys(std::vector<ApiKey> keys) {
  std::unordered_set<std::string> seen;
  for (ApiKey& k : keys) {
    // An empty key would be skipped, and a configuration of only empty keys (an unset variable expanded into
    // --api-key "") would leave the server open: refuse it.
    if (k.key.empty()) fail("API key number {} is empty", keys_.size() + 1);
    if (!seen.insert(k.key).second) fail("API key number {} is configured twice", keys_.size() + 1);
    // '#' is outside the names an entry may choose, so no named key joins an unnamed key's tenant.
    if (k.name.empty()) k.name = "#" + std::to_string(keys_.size() + 1);
    keys_.push_back(std::move(k));
  }
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length; a length mismatch still costs the same work and fails at the end.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

const ApiKey* ApiKeys::check(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size()) return nullptr;
  for (size_t i = 0; i < kBearer.size(); ++i)  // the scheme is case-insensitive
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i])))
      return nullptr;
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  const ApiKey* match = nullptr;
  for (const ApiKey& key : keys_)  // no early exit: every key is compared
    if (constant_time_equal(key.key, token) && !match) match = &key;
  return match;
}

}  // namespace tessera::server
