// Which cached state a request may see. Every result-cache entry is keyed on the tenant (the API key's name,
// never the key) and the request's `cache_salt`. The prefix cache gets a namespace per (tenant, salt): a keyed
// hash (SipHash-2-4) under a secret drawn at start-up, so that no tenant can name or aim at another's
// namespace by choosing a salt. Without API keys there is one tenant; with --shared-prefix-cache tenants share
// prefixes (a salt still separates).
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera::server {

class CacheScopes {
 public:
  // `share_prefixes`: tenants share the prefix cache (only the salt separates).
  explicit CacheScopes(bool share_prefixes);

  // The engine's Request::cache_namespace; 0 (the common namespace) when nothing separates the request.
  uint64_t prefix_namespace(std::string_view tenant, std::string_view salt) const;

 private:
  bool share_prefixes_;
  uint64_t k0_, k1_;  // the secret
};

// SipHash-2-4 (Aumasson and Bernstein) of `data` under the 128-bit key (k0, k1).
uint64_t siphash24(uint64_t k0, uint64_t k1, std::string_view data);

}  // namespace tessera::server
