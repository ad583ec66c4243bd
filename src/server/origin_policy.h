// Who may talk to the server from a browser. DNS rebinding: a page on evil.example resolves its own name to
// 127.0.0.1 and reads the local server as "same origin"; its requests carry `Host: evil.example`, so the Host
// header is checked against the names the server is known by. CSRF: a page posts to the API from the user's
// browser; browsers say where such a request comes from in `Origin`, which must be one of --cors-origins (none
// by default) on POST routes. Requests without an Origin (curl, SDKs, servers) are not browsers' and pass.
//
// Host check: with --allowed-hosts, the Host (without its port) must be one of them ("*" allows any). Without
// it, a server bound to a loopback address accepts the loopback names (localhost, 127.x.y.z, ::1) and its bound
// address; a server bound to another address accepts any Host (it is reached by names it cannot know: give
// --allowed-hosts). A request without a Host header passes (HTTP/1.0 clients; browsers always send one).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

class OriginPolicy {
 public:
  OriginPolicy() = default;  // no Host check, and no browser origin allowed
  // `bind_host`: the --host address; `allowed_hosts`: --allowed-hosts (empty: the default above);
  // `cors_origins`: --cors-origins, exact "scheme://host[:port]" strings or "*".
  OriginPolicy(const std::string& bind_host, std::vector<std::string> allowed_hosts,
               std::vector<std::string> cors_origins);

  bool host_allowed(std::string_view host_header) const;
  // An absent Origin is allowed; a present one must be listed (browsers send "null" for opaque origins).
  bool origin_allowed(std::string_view origin) const;
  // Whether responses should carry CORS headers for this (allowed, present) Origin.
  bool cors(std::string_view origin) const { return !origin.empty() && !cors_origins_.empty() && origin_allowed(origin); }

 private:
  bool check_hosts_ = false;
  bool loopback_names_ = false;  // the loopback default
  std::vector<std::string> allowed_hosts_;  // lower case, without port or brackets
  std::vector<std::string> cors_origins_;
};

// Whether `host` (an address or a name, no port) is a loopback one: localhost, 127.0.0.0/8, ::1.
bool is_loopback_host(std::string_view host);

}  // namespace tessera::server
