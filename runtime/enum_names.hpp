// The one table that maps an enum to its names (metric labels, configuration spellings) and back.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gatewayd::runtime {

// For enums whose values run 0..N-1 in declaration order: names[i] is the name of value i.
// Declared next to the enum, e.g.
//   enum class color : std::uint8_t { red, green };
//   inline constexpr runtime::enum_names<color, 2> color_names{{"red", "green"}};
// so to_string, parsing, the count (array sizes of per-value counters) and the list of
// valid spellings in an error message all come from one place.
template <class Enum, std::size_t N>
class enum_names {
 public:
  static constexpr std::size_t count = N;

  constexpr explicit enum_names(std::array<std::string_view, N> names) noexcept : names_(names) {}

  constexpr std::string_view operator()(Enum e) const noexcept {
    const auto i = static_cast<std::size_t>(e);
    return i < N ? names_[i] : std::string_view{"unknown"};
  }

  constexpr std::optional<Enum> parse(std::string_view text) const noexcept {
    for (std::size_t i = 0; i < N; ++i) {
      if (names_[i] == text) return static_cast<Enum>(i);
    }
    return std::nullopt;
  }

  // "a, b or c": what an error message offers as the valid spellings.
  std::string choices() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) out += i + 1 == N ? " or " : ", ";
      out += names_[i];
    }
    return out;
  }

  constexpr const std::array<std::string_view, N>& all() const noexcept { return names_; }

 private:
  std::array<std::string_view, N> names_;
};

}  // namespace gatewayd::runtime
