// The publish answers for the last few addresses a thread checked under one rule: a supplier
// that mixes a handful of addresses is answered by a memcmp instead of its rule's patterns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gatewayd::suppliers {

// The caller forgets the memo whenever the rule it answers for changes (another supplier's
// pass, another table). Addresses longer than max_address are never remembered.
class permission_memo {
 public:
  static constexpr std::size_t ways = 4;
  static constexpr std::size_t max_address = 64;

  // 1 permitted, 0 refused, -1 not remembered.
  int find(std::string_view address) noexcept {
    if (address.empty()) return -1;  // an empty entry must not answer it
    for (std::size_t i = 0; i < ways; ++i) {
      const std::size_t at = (last_ + i) % ways;
      const entry& e = entries_[at];
      if (e.length == address.size() && std::memcmp(e.address, address.data(), e.length) == 0) {
        last_ = at;
        return e.permitted ? 1 : 0;
      }
    }
    return -1;
  }

  void remember(std::string_view address, bool permitted) noexcept {
    if (address.empty() || address.size() > max_address) return;
    entry& e = entries_[next_];
    e.length = static_cast<std::uint8_t>(address.size());
    std::memcpy(e.address, address.data(), address.size());
    e.permitted = permitted;
    last_ = next_;
    next_ = (next_ + 1) % ways;
  }

  void forget() noexcept {
    for (entry& e : entries_)
      e.length = 0;
    last_ = next_ = 0;
  }

 private:
  struct entry {
    std::uint8_t length = 0;  // 0 = empty (addresses are never empty)
    bool permitted = false;
    char address[max_address] = {};
  };

  std::array<entry, ways> entries_{};
  std::size_t last_ = 0;  // the entry that answered last: tried first
  std::size_t next_ = 0;  // the next to replace: round robin
};

}  // namespace gatewayd::suppliers
