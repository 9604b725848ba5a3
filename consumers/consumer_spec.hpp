// One consumer as the operator declared it ([consumers.NAME] in routes.toml): plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "consumers/consumer_tls.hpp"
#include "consumers/member_choice.hpp"
#include "consumers/overflow_policy.hpp"
#include "net/endpoint.hpp"

namespace gatewayd::consumers {

struct consumer_spec {
  std::string name;
  net::endpoint address;  // the gateway dials it
  // A group (`endpoints = [...]`, exclusive with `endpoint`): one member per endpoint, each a
  // consumer of its own with these settings, each frame to one of them (`balance`).
  std::vector<net::endpoint> endpoints;
  balance_policy balance = balance_policy::round_robin;
  // A group member's own spec (built by the gateway, never read from a file): its endpoint as
  // written, the `member` label of its series. Empty for a consumer that is not a member.
  std::string member;
  std::uint32_t queue_capacity = 10000;  // frames
  std::uint64_t queue_bytes = 0;         // 0 = no byte cap
  overflow_policy overflow = overflow_policy::drop_oldest;
  std::optional<consumer_tls> tls;  // absent: plaintext
  // The consumer acknowledges what it took (`ack N`): frames written stay held until then and
  // go first to its next connection. Changing it on reload replaces the consumer.
  bool ack = false;
  // What is kept written but unacknowledged for an `ack` consumer: reaching it is not keeping
  // up (as a full socket).
  std::uint64_t max_unacked_bytes = default_max_unacked_bytes;

  // Its spool on disk ([gateway] spool_dir/NAME): what its memory queue cannot hold waits there
  // instead of being dropped or pausing its suppliers. 0: none.
  std::uint64_t spool_max_bytes = 0;

  static constexpr std::uint64_t default_max_unacked_bytes = 8u << 20;

  friend bool operator==(const consumer_spec&, const consumer_spec&) = default;
};

}  // namespace gatewayd::consumers
