// The 16 bytes every traffic payload starts with, so a receiver can time the frame and check
// its order per (sender, stream): the one numbering format of tools/, tests/ and bench/.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <optional>
#include <string_view>

namespace gatewayd::traffic {

inline constexpr std::size_t header_size = 16;
inline constexpr unsigned sequence_bits = 40;
inline constexpr std::uint64_t max_sequence = (std::uint64_t{1} << sequence_bits) - 1;
// A stream is one address of a sender that rotates over several (frame i to address i mod k).
inline constexpr std::size_t max_streams = 256;

// Little-endian on the wire (only peers read it): send time (8 bytes), then one 64-bit word
// of sequence (bits 0-39), stream (40-47) and sender id (48-63).
struct payload_header {
  std::uint64_t send_ns = 0;   // CLOCK_MONOTONIC when sent; sender and receiver share the clock
  std::uint64_t sequence = 0;  // per (sender, stream), from 0
  std::uint8_t stream = 0;     // the index of the address among the sender's addresses
  std::uint16_t sender = 0;    // tells concurrent senders apart
};

namespace detail {
// The byte order is fixed whatever the host's: a little-endian host copies the word as is.
inline void store_le(char* out, std::uint64_t v) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &v, 8);
  } else {
    for (int i = 0; i < 8; ++i)
      out[i] = static_cast<char>(v >> (8 * i));
  }
}
inline std::uint64_t load_le(const char* in) noexcept {
  std::uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, in, 8);
  } else {
    for (int i = 7; i >= 0; --i)
      v = (v << 8) | static_cast<unsigned char>(in[i]);
  }
  return v;
}
}  // namespace detail

// Writes the header into the first header_size bytes of `payload`.
inline void store_header(char* payload, const payload_header& h) noexcept {
  detail::store_le(payload, h.send_ns);
  detail::store_le(payload + 8, (h.sequence & max_sequence) |
                                    std::uint64_t{h.stream} << sequence_bits |
                                    std::uint64_t{h.sender} << 48);
}

inline payload_header load_header(const char* payload) noexcept {
  const std::uint64_t word = detail::load_le(payload + 8);
  return {detail::load_le(payload), word & max_sequence,
          static_cast<std::uint8_t>(word >> sequence_bits), static_cast<std::uint16_t>(word >> 48)};
}

// The header of a payload, or nothing when it is too short to carry one.
inline std::optional<payload_header> read_header(std::string_view payload) noexcept {
  if (payload.size() < header_size) return std::nullopt;
  return load_header(payload.data());
}

inline std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

}  // namespace gatewayd::traffic
