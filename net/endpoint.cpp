#include "net/endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

namespace gatewayd::net {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view text) {
  // from_chars alone would accept "080"-style input fine but also stop at the first
  // non-digit; demand digits only so "80x" or "+80" is refused.
  if (text.empty() || text.size() > 5) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  unsigned value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

bool valid_ip(int family, const std::string& host) {
  // inet_pton reads a C string: an embedded NUL would hide whatever follows it.
  if (host.find('\0') != std::string::npos) return false;
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(family, host.c_str(), buf) == 1;
}

}  // namespace

std::string endpoint::to_string() const {
  std::string out;
  if (is_ipv6()) {
    out += '[';
    out += host;
    out += ']';
  } else {
    out += host;
  }
  out += ':';
  out += std::to_string(port);
  return out;
}

bool endpoint::is_ipv6() const noexcept {
  return host.find(':') != std::string::npos;
}

std::optional<endpoint> parse_endpoint(std::string_view text) {
  std::string_view host;
  std::string_view port;
  int family = AF_INET;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    family = AF_INET6;
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  endpoint result;
  result.host.assign(host);
  if (host.empty() || !valid_ip(family, result.host)) return std::nullopt;
  const auto port_number = parse_port(port);
  if (!port_number) return std::nullopt;
  result.port = *port_number;
  return result;
}

}  // namespace gatewayd::net
