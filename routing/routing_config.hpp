// The routing table as the operator wrote it (routes.toml): plain, validated data, no behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "routing/endpoint.hpp"

namespace gatewayd::routing {

// What a consumer's queue does when a frame arrives and it is full (see design.md).
enum class overflow_policy : std::uint8_t { drop_oldest, drop_newest, disconnect, backpressure };

// The configuration spelling: "drop-oldest", "drop-newest", "disconnect", "backpressure".
std::string_view to_string(overflow_policy p) noexcept;
std::optional<overflow_policy> parse_overflow_policy(std::string_view text) noexcept;

struct consumer_spec {
  std::string name;
  endpoint address;                      // the gateway dials it
  std::uint32_t queue_capacity = 10000;  // frames
  std::uint64_t queue_bytes = 0;         // 0 = no byte cap
  overflow_policy overflow = overflow_policy::drop_oldest;

  friend bool operator==(const consumer_spec&, const consumer_spec&) = default;
};

struct route_spec {
  std::string match;            // a valid pattern (routing/pattern.hpp)
  std::vector<std::string> to;  // consumer names, at least one

  friend bool operator==(const route_spec&, const route_spec&) = default;
};

struct routing_config {
  std::vector<consumer_spec> consumers;    // in file order: a consumer's index is its position
  std::vector<route_spec> routes;          // in file order
  std::optional<std::string> dead_letter;  // consumer that receives unroutable frames

  friend bool operator==(const routing_config&, const routing_config&) = default;
};

}  // namespace gatewayd::routing
