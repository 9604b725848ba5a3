// The text and path forms the configuration readers share: a value quoted in a message, a
// path made absolute and normal for the running configuration.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace gatewayd::config {

inline std::string in_quotes(std::string_view s) {
  return '"' + std::string{s} + '"';
}

// Absolute against the working directory and without . or .. (the path as named when the
// working directory cannot be read).
inline std::filesystem::path absolute_normal(const std::filesystem::path& p) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(p, ec);
  return (ec ? p : absolute).lexically_normal();
}

}  // namespace gatewayd::config
