// What one sending thread of `gateway-peer send` did, as its report shows it: the connections
// it made, the frames it wrote and, with --confirm, what became of them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/control_message.hpp"

namespace gatewayd::tools {

// One connection a sending thread made.
struct link_record {
  std::string to, from;
  std::uint16_t sender = 0;
  std::uint64_t frames = 0;       // written on it (with --confirm: first sends and resends)
  std::string ended = "stopped";  // "asked to leave", "lost: why", "bad control frame: why",
                                  // or "stopped" (the end)
};

// With --confirm: frames sent = confirmed + rejected + unconfirmed.
struct confirm_counts {
  std::uint64_t confirmed = 0;       // settled and not rejected
  std::uint64_t unconfirmed = 0;     // neither confirmed nor rejected at exit
  std::uint64_t control_errors = 0;  // malformed control frames, each dropping its connection
  std::array<std::uint64_t, protocol::reject_reason_count> rejected{};  // [reason - 1]
};

struct connection_result {
  std::uint64_t frames = 0;  // written whole; with --confirm: sent a first time
  std::uint64_t bytes = 0;
  // Without --confirm: frames written again after their write had failed. With it: frames
  // sent again, byte for byte, on a later connection because they were not yet confirmed.
  std::uint64_t resent = 0;
  confirm_counts confirm;
  std::vector<link_record> links;
  std::string error;  // empty when it ended normally
};

// A fresh sender id for the payload headers of a new connection (order holds per connection,
// so each one is a sender of its own).
std::uint16_t next_sender_id();

}  // namespace gatewayd::tools
