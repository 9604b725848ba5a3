// The answers for the last few addresses a thread looked up, found by a memcmp: a supplier that
// repeats one address, or cycles through a few, skips the lookup (route_memo, permission_memo).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace gatewayd::suppliers {

// Frames interleaving a handful of addresses (each frame to the next consumer in turn) are the
// common mixed shape; the entry after the last hit is tried second, so a round over the entries
// costs two compares per frame. Replacement is round robin (no pathological cycle). Addresses
// longer than max_address are never remembered. `Answer` is what an address is answered with,
// default-constructed when an entry is forgotten.
template <class Answer>
class address_memo {
 public:
  static constexpr std::size_t ways = 4;
  static constexpr std::size_t max_address = 64;

  struct entry {
    std::uint8_t length = 0;  // 0 = empty (addresses are never empty)
    char address[max_address] = {};
    Answer answer{};
  };

  static bool fits(std::string_view address) noexcept {
    return !address.empty() && address.size() <= max_address;
  }

  entry* find(std::string_view address) noexcept {
    if (address.empty()) return nullptr;  // an empty entry must not answer it
    if (entry* e = match(last_, address)) return e;
    for (std::size_t i = 1; i < ways; ++i) {
      const std::size_t at = (last_ + i) % ways;
      if (entry* e = match(at, address)) {
        last_ = at;
        return e;
      }
    }
    return nullptr;
  }

  // The entry the next remember() replaces (its answer is still there to settle first).
  entry& victim() noexcept { return entries_[next_]; }

  // victim() now stands for `address` (fits() must hold) and is the last hit; the caller sets
  // its answer.
  entry& remember(std::string_view address) noexcept {
    entry& e = entries_[next_];
    e.length = static_cast<std::uint8_t>(address.size());
    std::memcpy(e.address, address.data(), address.size());
    last_ = next_;
    next_ = (next_ + 1) % ways;
    return e;
  }

  std::span<entry> entries() noexcept { return entries_; }

  // When what the answers were for changes (another table, another rule).
  void forget() noexcept {
    for (entry& e : entries_) {
      e.length = 0;
      e.answer = Answer{};
    }
    last_ = next_ = 0;
  }

 private:
  entry* match(std::size_t at, std::string_view address) noexcept {
    entry& e = entries_[at];
    return e.length == address.size() && std::memcmp(e.address, address.data(), e.length) == 0
               ? &e
               : nullptr;
  }

  std::array<entry, ways> entries_{};
  std::size_t last_ = 0;  // the entry that answered last
  std::size_t next_ = 0;  // the next to replace
};

}  // namespace gatewayd::suppliers
