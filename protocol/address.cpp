#include "protocol/address.hpp"

#include <array>

namespace gatewayd::protocol {
namespace {

constexpr std::array<bool, 256> make_token_table() {
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
constexpr std::array<bool, 256> token_table = make_token_table();

}  // namespace

bool is_token_char(unsigned char c) noexcept {
  return token_table[c];
}

std::size_t first_bad_address_byte(std::string_view address, std::size_t checked) noexcept {
  bool token_start = checked == 0 || address[checked - 1] == '.';
  for (std::size_t i = checked; i < address.size(); ++i) {
    const auto c = static_cast<unsigned char>(address[i]);
    if (c == '.') {
      if (token_start) return i;  // empty token
      token_start = true;
    } else if (token_table[c]) {
      token_start = false;
    } else {
      return i;
    }
  }
  // A trailing '.' leaves an empty last token: blame the dot.
  return token_start ? address.size() - 1 : address.size();
}

bool valid_address(std::string_view address) noexcept {
  return !address.empty() && address.size() <= max_address_length &&
         first_bad_address_byte(address) == address.size();
}

}  // namespace gatewayd::protocol
