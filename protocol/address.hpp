// The GWP/1 address grammar: tokens of [A-Za-z0-9_-] joined by '.', at most 255 bytes.
#pragma once

#include <cstddef>
#include <string_view>

namespace gatewayd::protocol {

inline constexpr std::size_t max_address_length = 255;

// True for one address byte of the token alphabet.
bool is_token_char(unsigned char c) noexcept;
// True when `address` is a valid GWP/1 address.
bool valid_address(std::string_view address) noexcept;
// The offset of the first byte that makes `address` invalid (an empty token blames its dot),
// or address.size() when every byte is fine. The length limit is not checked here.
std::size_t first_bad_address_byte(std::string_view address) noexcept;

}  // namespace gatewayd::protocol
