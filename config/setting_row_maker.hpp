// How a configuration table row is bound to the struct member it names: compared, copied,
// written as text and, for the plain types, read from TOML with the row's bounds.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config/config_text.hpp"
#include "config/ktls_mode.hpp"
#include "config/settings.hpp"
#include "consumers/consumer_tls.hpp"
#include "consumers/member_choice.hpp"
#include "consumers/overflow_policy.hpp"
#include "net/cidr_block.hpp"
#include "net/endpoint.hpp"
#include "runtime/log.hpp"

namespace gatewayd::config::rows {

// The value as an operator would write it in a file, unquoted (the reload's log lines).
inline std::string text_of(const net::endpoint& e) {
  return e.to_string();
}
template <class T>
requires std::is_integral_v<T> std::string text_of(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    return std::to_string(v);
  }
}
template <class Rep, class Period>
std::string text_of(std::chrono::duration<Rep, Period> d) {
  return std::to_string(d.count());
}
inline std::string text_of(const std::filesystem::path& p) {
  return p.string();
}
inline std::string text_of(ktls_mode m) {
  return std::string{to_string(m)};
}
inline std::string text_of(log::level l) {
  return std::string{log::to_string(l)};
}
inline std::string text_of(consumers::overflow_policy p) {
  return std::string{consumers::overflow_policy_names(p)};
}
inline std::string text_of(consumers::balance_policy b) {
  return std::string{consumers::balance_policy_names(b)};
}
inline std::string text_of(const std::optional<consumers::consumer_tls>& tls) {
  return tls ? "TLS to " + tls->files.ca.string() : "plaintext";
}
template <class T>
std::string text_of(const std::vector<T>& list) {
  std::string s = "[";
  for (const auto& item : list) {
    if (s.size() > 1) s += ", ";
    s += item.to_string();
  }
  return s + "]";
}

// The value as a TOML literal: what docs' default column shows.
template <class T>
std::string literal_of(const T& v) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::chrono::milliseconds> ||
                std::is_same_v<T, std::chrono::microseconds>) {
    return text_of(v);
  } else if constexpr (requires {
                         v.begin();
                         v.front().to_string();
                       }) {
    std::string s = "[";
    for (const auto& item : v) {
      if (s.size() > 1) s += ", ";
      s += in_quotes(item.to_string());
    }
    return s + "]";
  } else {
    return in_quotes(text_of(v));
  }
}

// The plain types the table reads itself; any other key has a rule of its own in its reader.
template <class T>
constexpr bool plain = std::is_integral_v<T> || std::is_same_v<T, std::chrono::milliseconds> ||
                       std::is_same_v<T, std::chrono::microseconds>;

template <class T>
bool read_plain(toml_checker& check, const toml::table& t, std::string_view path,
                std::string_view key, const value_range& range, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    const auto v = check.boolean(t, path, key);
    if (v) out = *v;
    return v.has_value();
  } else {
    const auto v = check.integer(t, path, key, range.min, range.max);
    if (v) out = T(static_cast<std::conditional_t<std::is_integral_v<T>, T, std::int64_t>>(*v));
    return v.has_value();
  }
}

template <class M>
struct member_of;
template <class C, class T>
struct member_of<T C::*> {
  using config = C;
  using value = T;
};

// The row `r` (its words) bound to `Member`.
template <auto Member>
constexpr auto bind(setting_row<typename member_of<decltype(Member)>::config> r) {
  using C = typename member_of<decltype(Member)>::config;
  using T = typename member_of<decltype(Member)>::value;
  r.same = [](const C& a, const C& b) { return a.*Member == b.*Member; };
  r.copy = [](C& to, const C& from) { to.*Member = from.*Member; };
  r.text = [](const C& c) { return text_of(c.*Member); };
  r.literal = [](const C& c) { return literal_of(c.*Member); };
  if constexpr (plain<T>) {
    r.read = [](toml_checker& check, const toml::table& t, std::string_view path,
                const setting_row<C>& row,
                C& out) { return read_plain(check, t, path, row.key, row.range, out.*Member); };
  }
  return r;
}

}  // namespace gatewayd::config::rows
