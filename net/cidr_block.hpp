// An IPv4 or IPv6 network in CIDR notation: who may connect (the `allow` list).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gatewayd::net {

// An IPv4 or IPv6 network such as "10.0.0.0/8" or "fd00::/8" (a bare address is a /32 or
// /128) that suppliers may connect from.
struct cidr_block {
  bool ipv6 = false;
  std::array<std::uint8_t, 16> network{};  // IPv4 uses the first 4 bytes
  std::uint8_t prefix_length = 0;

  // `address` holds 4 (IPv4) or 16 (IPv6) bytes in network order, as asio's
  // address_v4/v6::to_bytes() gives them. An IPv4-mapped IPv6 address (::ffff:a.b.c.d,
  // what a dual-stack listener reports for an IPv4 peer) is matched as IPv4.
  bool contains(std::span<const std::uint8_t> address) const noexcept;
  std::string to_string() const;

  friend bool operator==(const cidr_block&, const cidr_block&) = default;
};

// nullopt plus a reason when `text` is not a CIDR block (host bits set count as an error:
// "10.0.0.1/8" is almost always a typo for a host or for "10.0.0.0/8").
std::optional<cidr_block> parse_cidr(std::string_view text, std::string* why = nullptr);

// True when `address` (4 or 16 bytes) is in one of `blocks`; an empty list allows everyone.
bool allowed_by(std::span<const cidr_block> blocks, std::span<const std::uint8_t> address) noexcept;

}  // namespace gatewayd::net
