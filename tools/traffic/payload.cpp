#include "tools/traffic/payload.hpp"

#include <algorithm>

namespace gatewayd::traffic {

void fill_payload(char* payload, std::size_t size) noexcept {
  static constexpr char filler[] = "hello from gateway-peer ";
  for (std::size_t i = header_size; i < size; ++i)
    payload[i] = filler[(i - header_size) % (sizeof filler - 1)];
}

std::string numbered_payload(std::uint16_t sender, std::uint64_t sequence, std::size_t size,
                             std::uint8_t stream) {
  std::string p(std::max(size, header_size), '\0');
  store_header(p.data(), payload_header{0, sequence, stream, sender});
  fill_payload(p.data(), p.size());
  return p;
}

}  // namespace gatewayd::traffic
