// API key checks.
#include "server/auth.h"

#include <cctype>
#include <fstream>

#include "core/error.h"

namespace tessera::server {

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (std::string& k : keys)
    if (!k.empty()) keys_.push_back(std::move(k));
}

std::vector<std::string> ApiKeys::read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read API keys file '{}'", path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    keys.push_back(line.substr(start));
  }
  return keys;
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

std::optional<std::string> ApiKeys::check(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() < kBearer.size()) return std::nullopt;
  for (size_t i = 0; i < kBearer.size(); ++i)  // the scheme is case-insensitive
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kBearer[i])))
      return std::nullopt;
  std::string_view token = authorization.substr(kBearer.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  const std::string* match = nullptr;
  for (const std::string& key : keys_)  // no early exit: every key is compared
    if (constant_time_equal(key, token) && !match) match = &key;
  if (!match) return std::nullopt;
  return *match;
}

}  // namespace tessera::server
