// The PROXY protocol v2 header a load balancer puts before a connection's bytes: a pure parser
// (no sockets) that says good, bad, or how many bytes it needs, like the frame codec.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gatewayd::net {

// The 12-byte signature, the version/command byte, the family byte, the 2-byte length.
inline constexpr std::size_t proxy_v2_fixed_size = 16;
// A header announcing more than this is refused. The spec allows 64 KiB of TLVs; HAProxy sends
// none by default, and the largest address block (two AF_UNIX paths) is 216 bytes.
inline constexpr std::size_t proxy_v2_max_size = proxy_v2_fixed_size + 1024;

// One end of the proxied connection.
struct proxy_address {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> bytes{};  // IPv4 uses the first 4, network order
  std::uint16_t port = 0;

  std::span<const std::uint8_t> address() const noexcept { return {bytes.data(), ipv6 ? 16u : 4u}; }
  std::string to_string() const;  // "192.0.2.7:4567", "[2001:db8::1]:4567"

  friend bool operator==(const proxy_address&, const proxy_address&) = default;
};

struct proxy_header {
  // LOCAL: the balancer speaks for itself (a health check); use the connection's own address.
  bool local = false;
  // Set for PROXY over TCP/IPv4 or TCP/IPv6; empty for LOCAL and for families the header may
  // carry but a TCP supplier cannot have (UNSPEC, UNIX, UDP): the connection's address stands.
  std::optional<proxy_address> source;
  std::optional<proxy_address> destination;
  std::size_t size = 0;  // bytes of the whole header, TLVs included: where the supplier's start
};

enum class proxy_error : std::uint8_t {
  none,
  bad_signature,  // not a PROXY v2 header (a v1 text header, or a supplier talking GWP/1)
  bad_version,    // version nibble other than 2
  bad_command,    // command other than LOCAL or PROXY
  bad_family,     // address family or transport nibble the spec does not define
  short_address,  // the length is smaller than the family's address block
  too_long,       // announces more than proxy_v2_max_size bytes
};
std::string_view to_string(proxy_error e) noexcept;

struct proxy_parse_result {
  enum class status : std::uint8_t { need_more, done, error };
  status state = status::need_more;
  // need_more: the total the header needs (proxy_v2_fixed_size until its length is known),
  // always more than was given.
  std::size_t needed = proxy_v2_fixed_size;
  proxy_header header;  // done
  proxy_error error = proxy_error::none;
};

// Parses the header at the start of `data`. Never reads past the header: bytes after it belong
// to the supplier. A wrong signature byte is an error as soon as it is seen.
proxy_parse_result parse_proxy_v2(std::span<const std::uint8_t> data) noexcept;

}  // namespace gatewayd::net
