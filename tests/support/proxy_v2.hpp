// PROXY protocol v2 headers as a balancer (HAProxy `send-proxy-v2`) writes them, for the
// end-to-end tests of gatewayd's proxy_protocol.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <string>

namespace gatewayd::test {

// PROXY over TCP from `source` to `destination` (both IPv4 or both IPv6).
inline std::string proxy_v2(const asio::ip::tcp::endpoint& source,
                            const asio::ip::tcp::endpoint& destination) {
  std::string h("\r\n\r\n\0\r\nQUIT\n", 12);
  const bool v6 = source.address().is_v6();
  h += '\x21';                // version 2, PROXY
  h += v6 ? '\x21' : '\x11';  // INET6 or INET, STREAM
  const std::uint16_t length = v6 ? 36 : 12;
  h += static_cast<char>(length >> 8);
  h += static_cast<char>(length & 0xFF);
  for (const auto& ep : {source, destination}) {
    if (v6) {
      for (auto b : ep.address().to_v6().to_bytes())
        h += static_cast<char>(b);
    } else {
      for (auto b : ep.address().to_v4().to_bytes())
        h += static_cast<char>(b);
    }
  }
  for (const auto& ep : {source, destination}) {
    h += static_cast<char>(ep.port() >> 8);
    h += static_cast<char>(ep.port() & 0xFF);
  }
  return h;
}

inline std::string proxy_v2(const std::string& source_ip, std::uint16_t source_port) {
  const auto a = asio::ip::make_address(source_ip);
  const auto to = a.is_v6() ? asio::ip::make_address("::1") : asio::ip::make_address("127.0.0.1");
  return proxy_v2({a, source_port}, {to, 7400});
}

// LOCAL: the balancer speaks for itself (a health check); no addresses.
inline std::string proxy_v2_local() {
  std::string h("\r\n\r\n\0\r\nQUIT\n", 12);
  h += std::string("\x20\x00\x00\x00", 4);
  return h;
}

}  // namespace gatewayd::test
