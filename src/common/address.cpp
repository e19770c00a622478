#include "hangscope/common/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

namespace hangscope {

HostPort split_endpoint(std::string_view endpoint) {
  if (!endpoint.empty() && endpoint.front() == '[') {
    const auto close = endpoint.find(']');
    if (close == std::string_view::npos) return {std::string(endpoint.substr(1)), ""};
    HostPort out{std::string(endpoint.substr(1, close - 1)), ""};
    if (close + 1 < endpoint.size() && endpoint[close + 1] == ':') {
      out.port = std::string(endpoint.substr(close + 2));
    }
    return out;
  }
  const auto colons = std::count(endpoint.begin(), endpoint.end(), ':');
  if (colons != 1) return {std::string(endpoint), ""};
  const auto colon = endpoint.find(':');
  return {std::string(endpoint.substr(0, colon)), std::string(endpoint.substr(colon + 1))};
}

bool is_ip_literal(std::string_view text) {
  const std::string ip(text);
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, ip.c_str(), &v4) == 1 || inet_pton(AF_INET6, ip.c_str(), &v6) == 1;
}

bool is_unspecified_ip(std::string_view ip) {
  const std::string text(ip);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return v4.s_addr == INADDR_ANY;
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&v6);
}

bool is_loopback_ip(std::string_view ip) {
  const std::string text(ip);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

bool is_loopback_host(std::string_view host) {
  return host == "localhost" || is_loopback_ip(host);
}

bool is_loopback_endpoint(std::string_view endpoint) {
  return is_loopback_host(split_endpoint(endpoint).host);
}

}  // namespace hangscope
