// API keys: `Authorization: Bearer <key>` checked against the configured keys in constant time, so that the
// response time does not reveal how much of a guess was right.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

class ApiKeys {
 public:
  ApiKeys() = default;
  explicit ApiKeys(std::vector<std::string> keys);
  // One key per line; blank lines and lines starting with '#' are skipped. Throws tessera::Error.
  static std::vector<std::string> read_file(const std::string& path);

  bool enabled() const { return !keys_.empty(); }
  // The matching key for an Authorization header value, or nullopt. Every key is compared in full.
  std::optional<std::string> check(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

// Equality whose running time depends only on the lengths, not on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tessera::server
