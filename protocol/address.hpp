// The GWP/1 address grammar: tokens of [A-Za-z0-9_-] joined by '.', at most 255 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace gatewayd::protocol {

inline constexpr std::size_t max_address_length = 255;

namespace detail {
constexpr std::array<bool, 256> make_token_chars() noexcept {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c)
    t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c)
    t[c] = true;
  for (int c = '0'; c <= '9'; ++c)
    t[c] = true;
  t['_'] = true;
  t['-'] = true;
  return t;
}
inline constexpr std::array<bool, 256> token_chars = make_token_chars();
}  // namespace detail

// True for one address byte of the token alphabet. Inline: the frame parser checks the bytes
// in which a supplier's next address differs from its last one with it, per frame.
inline bool is_token_char(unsigned char c) noexcept {
  return detail::token_chars[c];
}

// True when `address` is a valid GWP/1 address.
bool valid_address(std::string_view address) noexcept;
// The offset of the first byte that makes `address` invalid (an empty token blames its dot),
// or address.size() when every byte is fine. The length limit is not checked here.
// `checked`: its first `checked` bytes are known to begin a valid address (they are the start
// of one already checked), so only the bytes after them are looked at.
std::size_t first_bad_address_byte(std::string_view address, std::size_t checked = 0) noexcept;

}  // namespace gatewayd::protocol
