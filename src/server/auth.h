// API keys: `Authorization: Bearer <key>` checked against the configured keys in constant time, so that the
// response time does not reveal how much of a guess was right. Each key carries what it may do: its tenant name
// (the identity the caches are keyed on, never the key itself), the most urgent priority it may ask for, and its
// own rate limits.
//
// Keys file format (--api-keys-file, and TESSERA_API_KEYS with entries separated by newlines or commas): one key
// per line, then optional attributes; blank lines and lines starting with '#' are skipped.
//
//   sk-alice-1  name=alice priority_min=-10 rps=5 tpm=100000
//   sk-batch    name=batch priority_min=10
//   sk-plain
//
//   name=NAME        the tenant ([A-Za-z0-9._-], at most 64); keys with one name share its caches. Default: key-N,
//                    N being the key's position among all configured keys (from 1)
//   priority_min=P   the lowest (most urgent) priority its requests may ask for; lower is a 403. Default 0. A
//                    request that names no priority gets max(0, P)
//   rps=R tpm=T burst=B   its own rate limits (0: unlimited), instead of --rate-limit-rps/-tpm/-burst
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/rate_limiter.h"

namespace tessera::server {

struct ApiKey {
  std::string key;           // the secret: compared in constant time, never logged, never an identity
  std::string name;          // the tenant
  int32_t priority_min = 0;  // the most urgent priority its requests may ask for
  std::optional<double> rps, tpm, burst;  // its own limits; unset: the server's

  int32_t default_priority() const { return priority_min > 0 ? priority_min : 0; }
  // The server-wide limits with this key's own in their place.
  RateLimits limits(const RateLimits& server) const;
};

class ApiKeys {
 public:
  ApiKeys() = default;
  // Names the keys without one ("#N", which no name= can spell) and checks that no key appears twice. Throws tessera::Error.
  explicit ApiKeys(std::vector<ApiKey> keys);

  // Entries in the keys file format above; `source` names the text in errors (which never quote a key).
  // `separators`: the characters that end an entry ("\n" for a file, "\n," for the environment variable).
  // Throws tessera::Error.
  static std::vector<ApiKey> parse(std::string_view text, std::string_view source, std::string_view separators = "\n");
  static std::vector<ApiKey> read_file(const std::string& path);

  bool enabled() const { return !keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // The matching key for an Authorization header value, or null. Every key is compared in full.
  const ApiKey* check(std::string_view authorization) const;
  // Where `key` (one of these) is among the keys: its rate-limit identity.
  size_t position(const ApiKey& key) const { return size_t(&key - keys_.data()); }

 private:
  std::vector<ApiKey> keys_;
};

// Equality whose running time depends only on the lengths, not on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tessera::server
