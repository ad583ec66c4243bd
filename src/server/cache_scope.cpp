// Cache scopes and SipHash-2-4.
#include "server/cache_scope.h"

#include <cstring>
#include <random>
#include <string>

namespace tessera::server {
namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

uint64_t random_u64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

}  // namespace

uint64_t siphash24(uint64_t k0, uint64_t k1, std::string_view data) {
  SipState s{k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
             k1 ^ 0x7465646279746573ull};
  const size_t n_words = data.size() / 8;
  for (size_t i = 0; i < n_words; ++i) {
    uint64_t m = 0;
    for (int b = 7; b >= 0; --b) m = (m << 8) | static_cast<uint8_t>(data[i * 8 + size_t(b)]);  // little-endian
    s.absorb(m);
  }
  uint64_t last = uint64_t(data.size() & 0xff) << 56;
  for (size_t b = 0; b < data.size() % 8; ++b) last |= uint64_t(static_cast<uint8_t>(data[n_words * 8 + b])) << (8 * b);
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

CacheScopes::CacheScopes(bool share_prefixes)
    : share_prefixes_(share_prefixes), k0_(random_u64()), k1_(random_u64()) {}

uint64_t CacheScopes::prefix_namespace(std::string_view tenant, std::string_view salt) const {
  if (share_prefixes_) tenant = {};
  if (tenant.empty() && salt.empty()) return 0;
  // The tenant's length first, so that ("ab", "c") and ("a", "bc") differ.
  std::string data = std::to_string(tenant.size()) + ":";
  data.append(tenant).append(salt);
  const uint64_t h = siphash24(k0_, k1_, data);
  return h == 0 ? 1 : h;  // 0 is the common namespace
}

}  // namespace tessera::server
