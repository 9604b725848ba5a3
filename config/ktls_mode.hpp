// Whether a TLS connection offers OpenSSL the kernel's record layer ([tls] ktls, and each TLS
// consumer's `ktls`): "auto" uses it where the host has it, "off" never does.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/enum_names.hpp"

namespace gatewayd::config {

enum class ktls_mode : std::uint8_t { automatic, off };
inline constexpr runtime::enum_names<ktls_mode, 2> ktls_mode_names{{"auto", "off"}};
inline std::string_view to_string(ktls_mode m) noexcept {
  return ktls_mode_names(m);
}

}  // namespace gatewayd::config
