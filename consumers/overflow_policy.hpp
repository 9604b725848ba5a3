// What a consumer's queue does when a frame arrives and it is full (see design.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

enum class overflow_policy : std::uint8_t { drop_oldest, drop_newest, disconnect, backpressure };

// The configuration spelling.
inline constexpr runtime::enum_names<overflow_policy, 4> overflow_policy_names{
    {"drop-oldest", "drop-newest", "disconnect", "backpressure"}};
inline std::string_view to_string(overflow_policy p) noexcept {
  return overflow_policy_names(p);
}

}  // namespace gatewayd::consumers
