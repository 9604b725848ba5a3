#include "protocol/address.hpp"

namespace gatewayd::protocol {

std::size_t first_bad_address_byte(std::string_view address, std::size_t checked) noexcept {
  bool token_start = checked == 0 || address[checked - 1] == '.';
  for (std::size_t i = checked; i < address.size(); ++i) {
    const auto c = static_cast<unsigned char>(address[i]);
    if (c == '.') {
      if (token_start) return i;  // empty token
      token_start = true;
    } else if (is_token_char(c)) {
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
