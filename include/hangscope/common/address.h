// Network addresses as hangscope meets them (a listen address, a socket's endpoint, an interface
// address): split into host and port, and the one loopback predicate every area uses.
#pragma once

#include <string>
#include <string_view>

namespace hangscope {

// An endpoint's host and port: "host:port", "[v6]:port", "[v6]", a bare IPv6 address (more
// than one ':', no brackets: all host) or a bare host. The host has no brackets; the port is ""
// when none is written.
struct HostPort {
  std::string host;
  std::string port;
};
HostPort split_endpoint(std::string_view endpoint);

// Whether `text` is a numeric IPv4 or IPv6 address (inet_pton), not a name.
bool is_ip_literal(std::string_view text);
// Whether `ip` is the unspecified address (0.0.0.0, ::): "any", which a client reaches as its own
// host.
bool is_unspecified_ip(std::string_view ip);

// Whether `ip` is a numeric loopback address: 127.0.0.0/8, ::1, or an IPv4-mapped ::ffff:127.x.
// Parsed with inet_pton, so "127.example.com" or "127.0.0.1.nip.io" (names) are not loopback.
bool is_loopback_ip(std::string_view ip);

// Whether `host` names loopback: a numeric loopback address, or literally "localhost". No other
// name is resolved: what a name resolves to is the resolver's (and whoever controls its DNS) to
// say and may change between this check and a bind, so a name is never treated as loopback.
bool is_loopback_host(std::string_view host);

// is_loopback_host of the endpoint's host.
bool is_loopback_endpoint(std::string_view endpoint);

}  // namespace hangscope
