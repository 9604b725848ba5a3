// The verifier's map from a stream's key (lane, sender, stream) to its sequence window: open
// addressing over a power-of-two table, so a lookup allocates nothing; it grows only when a
// stream never seen before arrives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/traffic/sequence_window.hpp"

namespace gatewayd::traffic {

struct stream_key {
  std::uint32_t lane = 0;  // which copy of the traffic (a receiver's connection slot)
  std::uint16_t sender = 0;
  std::uint8_t stream = 0;
  std::uint64_t packed() const noexcept {
    return std::uint64_t{lane} << 24 | std::uint64_t{sender} << 8 | stream;
  }
  static stream_key unpack(std::uint64_t k) noexcept {
    return {static_cast<std::uint32_t>(k >> 24), static_cast<std::uint16_t>(k >> 8),
            static_cast<std::uint8_t>(k)};
  }
};

class stream_table {
 public:
  stream_table() : slots_(16) {}

  sequence_window& find_or_add(std::uint64_t key) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      slot& s = slots_[i];
      if (s.key_plus_one == key + 1) return s.window;
      if (s.key_plus_one == 0) return add(key);
    }
  }
  std::size_t size() const noexcept { return size_; }

  // f(stream_key, const sequence_window&) for every stream seen.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& s : slots_)
      if (s.key_plus_one != 0) f(stream_key::unpack(s.key_plus_one - 1), s.window);
  }

 private:
  struct slot {
    std::uint64_t key_plus_one = 0;  // 0 = empty
    sequence_window window;
  };
  static std::size_t hash(std::uint64_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15u) >> 32);
  }
  sequence_window& add(std::uint64_t key);

  std::vector<slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace gatewayd::traffic
