#include "net/proxy_header.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace gatewayd::net {
namespace {

constexpr std::array<std::uint8_t, 12> signature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                    0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

// The family byte's high nibble, and the address block each family needs.
enum family : std::uint8_t { unspec = 0, inet = 1, inet6 = 2, unix_socket = 3 };
constexpr std::size_t address_block_size[] = {0, 12, 36, 216};
enum transport : std::uint8_t { any = 0, stream = 1, dgram = 2 };

proxy_parse_result fail(proxy_error e) noexcept {
  proxy_parse_result r;
  r.state = proxy_parse_result::status::error;
  r.error = e;
  return r;
}

std::uint16_t load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

// The source and destination of an INET or INET6 block: both addresses, then both ports.
void read_addresses(const std::uint8_t* block, bool ipv6, proxy_header& h) noexcept {
  const std::size_t n = ipv6 ? 16 : 4;
  proxy_address source, destination;
  source.ipv6 = destination.ipv6 = ipv6;
  std::memcpy(source.bytes.data(), block, n);
  std::memcpy(destination.bytes.data(), block + n, n);
  source.port = load_u16(block + 2 * n);
  destination.port = load_u16(block + 2 * n + 2);
  h.source = source;
  h.destination = destination;
}

}  // namespace

std::string proxy_address::to_string() const {
  char text[INET6_ADDRSTRLEN];
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, bytes.data(), text, sizeof text);
  const std::string port_text = std::to_string(port);
  return ipv6 ? '[' + std::string{text} + "]:" + port_text : std::string{text} + ':' + port_text;
}

std::string_view to_string(proxy_error e) noexcept {
  switch (e) {
    case proxy_error::none:
      return "none";
    case proxy_error::bad_signature:
      return "not a PROXY protocol v2 header";
    case proxy_error::bad_version:
      return "unsupported PROXY protocol version";
    case proxy_error::bad_command:
      return "unknown PROXY protocol command";
    case proxy_error::bad_family:
      return "unknown PROXY protocol address family";
    case proxy_error::short_address:
      return "PROXY protocol address block too short for its family";
    case proxy_error::too_long:
      return "PROXY protocol header too long";
  }
  return "unknown";
}

proxy_parse_result parse_proxy_v2(std::span<const std::uint8_t> data) noexcept {
  const std::size_t seen = std::min(data.size(), signature.size());
  if (seen != 0 && std::memcmp(data.data(), signature.data(), seen) != 0) {
    return fail(proxy_error::bad_signature);
  }
  if (data.size() < proxy_v2_fixed_size) return {};

  const std::uint8_t version = data[12] >> 4;
  const std::uint8_t command = data[12] & 0x0F;
  if (version != 2) return fail(proxy_error::bad_version);
  if (command > 1) return fail(proxy_error::bad_command);
  const std::size_t total = proxy_v2_fixed_size + load_u16(&data[14]);
  if (total > proxy_v2_max_size) return fail(proxy_error::too_long);

  proxy_parse_result r;
  // LOCAL tells the receiver to discard the block, family included (the spec's words), so
  // only a PROXY header's family is checked.
  const bool local = command == 0;
  const std::uint8_t af = data[13] >> 4;
  const std::uint8_t tp = data[13] & 0x0F;
  if (!local) {
    if (af > unix_socket || tp > dgram) return fail(proxy_error::bad_family);
    if (total - proxy_v2_fixed_size < address_block_size[af]) {
      return fail(proxy_error::short_address);
    }
  }
  if (data.size() < total) {
    r.needed = total;
    return r;
  }
  r.state = proxy_parse_result::status::done;
  r.header.local = local;
  r.header.size = total;
  // A TCP supplier has an INET or INET6 stream address; any other family leaves the
  // connection's own address in force.
  if (!local && tp == stream && (af == inet || af == inet6)) {
    read_addresses(&data[proxy_v2_fixed_size], af == inet6, r.header);
  }
  return r;
}

}  // namespace gatewayd::net
