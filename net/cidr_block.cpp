#include "net/cidr_block.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace gatewayd::net {
namespace {

bool prefix_equal(const std::uint8_t* a, const std::uint8_t* b, unsigned bits) noexcept {
  const unsigned whole = bits / 8;
  if (std::memcmp(a, b, whole) != 0) return false;
  if (bits % 8 == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - bits % 8));
  return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

bool cidr_block::contains(std::span<const std::uint8_t> address) const noexcept {
  if (address.size() == 16 && !ipv6) {
    static constexpr std::uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(address.data(), v4_mapped, sizeof v4_mapped) != 0) return false;
    address = address.subspan(12);
  }
  if (address.size() != (ipv6 ? 16u : 4u)) return false;
  return prefix_equal(address.data(), network.data(), prefix_length);
}

std::string cidr_block::to_string() const {
  char text[INET6_ADDRSTRLEN];
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, network.data(), text, sizeof text);
  return std::string{text} + '/' + std::to_string(prefix_length);
}

std::optional<cidr_block> parse_cidr(std::string_view text, std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<cidr_block> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const auto slash = text.find('/');
  const std::string host{text.substr(0, slash)};
  cidr_block block;
  if (host.find('\0') != std::string::npos) return fail("not an IPv4 or IPv6 address");
  if (inet_pton(AF_INET, host.c_str(), block.network.data()) == 1) {
    block.ipv6 = false;
  } else if (inet_pton(AF_INET6, host.c_str(), block.network.data()) == 1) {
    block.ipv6 = true;
  } else {
    return fail("not an IPv4 or IPv6 address (write 10.0.0.0/8, fd00::/8 or a single address)");
  }
  const unsigned max_prefix = block.ipv6 ? 128 : 32;
  unsigned prefix = max_prefix;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    const bool all_digits =
        !digits.empty() && digits.size() <= 3 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (all_digits) std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (!all_digits || prefix > max_prefix) {
      return fail("prefix length must be 0.." + std::to_string(max_prefix));
    }
  }
  block.prefix_length = static_cast<std::uint8_t>(prefix);
  cidr_block network = block;
  for (unsigned bit = prefix; bit < max_prefix; ++bit) {
    network.network[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  }
  if (network.network != block.network) {
    return fail("host bits are set after the /" + std::to_string(prefix) +
                " prefix (did you mean " + network.to_string() + "?)");
  }
  return block;
}

bool allowed_by(std::span<const cidr_block> blocks,
                std::span<const std::uint8_t> address) noexcept {
  if (blocks.empty()) return true;
  return std::any_of(blocks.begin(), blocks.end(),
                     [&](const cidr_block& b) { return b.contains(address); });
}

}  // namespace gatewayd::net
