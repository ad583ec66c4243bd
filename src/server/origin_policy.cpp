// Host and Origin checks.
#include "server/origin_policy.h"

#include <algorithm>
#include <cctype>

#include <boost/asio/ip/address.hpp>

namespace tessera::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "Example.com:8080" -> "example.com", "[::1]:80" -> "::1", "localhost." -> "localhost".
std::string host_without_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    host = close == std::string_view::npos ? host.substr(1) : host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return lower(host);
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = host_without_port(host);
  if (h == "localhost" || h.ends_with(".localhost")) return true;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(h, ec);
  return !ec && address.is_loopback();
}

OriginPolicy::OriginPolicy(const std::string& bind_host, std::vector<std::string> allowed_hosts,
                           std::vector<std::string> cors_origins)
    : cors_origins_(std::move(cors_origins)) {
  if (!allowed_hosts.empty()) {
    check_hosts_ = std::find(allowed_hosts.begin(), allowed_hosts.end(), "*") == allowed_hosts.end();
    for (const std::string& h : allowed_hosts) allowed_hosts_.push_back(host_without_port(h));
  } else if (is_loopback_host(bind_host)) {
    check_hosts_ = true;
    loopback_names_ = true;
    allowed_hosts_.push_back(host_without_port(bind_host));
  }
}

bool OriginPolicy::host_allowed(std::string_view host_header) const {
  if (!check_hosts_ || host_header.empty()) return true;
  const std::string host = host_without_port(host_header);
  if (loopback_names_ && is_loopback_host(host)) return true;
  return std::find(allowed_hosts_.begin(), allowed_hosts_.end(), host) != allowed_hosts_.end();
}

bool OriginPolicy::origin_allowed(std::string_view origin) const {
  if (origin.empty()) return true;
  for (const std::string& o : cors_origins_)
    if (o == "*" || o == origin) return true;
  return false;
}

}  // namespace tessera::server
