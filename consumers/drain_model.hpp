// Who writes a consumer's queue to its socket ([gateway] consumer_drain).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// `strand` (the design): gathered async writes on the consumer's own strand; put() never waits
// for the network. `mutex` (the strands article's baseline, kept for the benchmark): the thread
// that queued frames writes them at once with blocking writes under a per-consumer mutex.
enum class drain_model : std::uint8_t { strand, mutex };

inline constexpr runtime::enum_names<drain_model, 2> drain_model_names{{"strand", "mutex"}};
inline std::string_view to_string(drain_model m) noexcept {
  return drain_model_names(m);
}

}  // namespace gatewayd::consumers
