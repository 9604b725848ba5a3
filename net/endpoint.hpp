// A literal IP address and port: where the gateway listens or which consumer it dials.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gatewayd::net {

struct endpoint {
  std::string host;  // an IPv4 or IPv6 literal, without brackets (ready for make_address())
  std::uint16_t port = 0;

  // "1.2.3.4:80" or "[::1]:80": the form parse_endpoint() accepts, so it round-trips.
  std::string to_string() const;
  bool is_ipv6() const noexcept;

  friend bool operator==(const endpoint&, const endpoint&) = default;
};

// Accepts "IPv4:port" and "[IPv6]:port" with a literal address and a port of 0..65535
// (0 asks the kernel for any free port, which tests use for listeners). Host names are
// refused: resolving them would make the configuration depend on DNS at load time.
std::optional<endpoint> parse_endpoint(std::string_view text);

}  // namespace gatewayd::net
