// The 16 bytes gateway-peer puts at the start of each payload so a receiver can time it and
// check its order: send time, sequence number, sender id (little-endian; only peers read it).
#pragma once

#include <cstdint>
#include <cstring>
#include <ctime>

namespace gatewayd::tools {

inline constexpr std::size_t peer_header_size = 16;
inline constexpr std::uint64_t max_sequence = (std::uint64_t{1} << 48) - 1;

struct peer_header {
  std::uint64_t send_ns = 0;    // CLOCK_MONOTONIC at write time (sender and receiver share it)
  std::uint64_t sequence = 0;   // 48 bits: per sender, from 0
  std::uint16_t sender_id = 0;  // tells the streams of concurrent senders apart
};

// Writes the header into the first peer_header_size bytes of `payload`.
inline void store_peer_header(char* payload, const peer_header& h) noexcept {
  std::memcpy(payload, &h.send_ns, 8);
  const std::uint64_t seq_and_id = (h.sequence & max_sequence) | std::uint64_t{h.sender_id} << 48;
  std::memcpy(payload + 8, &seq_and_id, 8);
}

inline peer_header load_peer_header(const char* payload) noexcept {
  peer_header h;
  std::uint64_t seq_and_id = 0;
  std::memcpy(&h.send_ns, payload, 8);
  std::memcpy(&seq_and_id, payload + 8, 8);
  h.sequence = seq_and_id & max_sequence;
  h.sender_id = static_cast<std::uint16_t>(seq_and_id >> 48);
  return h;
}

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

}  // namespace gatewayd::tools
