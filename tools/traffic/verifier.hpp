// Checks received traffic payloads: order per (lane, sender, stream) -- lost, reordered,
// duplicated -- and latency from the send time; allocation-free for every stream seen before.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tools/traffic/log_histogram.hpp"
#include "tools/traffic/payload_header.hpp"
#include "tools/traffic/sequence_window.hpp"
#include "tools/traffic/stream_table.hpp"

namespace gatewayd::traffic {

class verifier {
 public:
  // Records one frame's payload received at `now_ns` (CLOCK_MONOTONIC). `lane` tells copies of
  // the same traffic apart: a receiver that is several consumers at once (several gateway
  // connections) sees each frame once per connection, and counts each connection's copy on its
  // own. Returns the header, or nothing for a payload too short to carry one.
  std::optional<payload_header> record(std::string_view payload, std::uint64_t now_ns,
                                       std::uint32_t lane = 0) {
    ++counts_.frames;
    if (payload.size() < header_size) {
      ++counts_.untimed;
      return std::nullopt;
    }
    const payload_header h = load_header(payload.data());
    // A zero send time marks a payload built without a clock (numbered_payload): order only.
    if (h.send_ns != 0) latency_.record(now_ns > h.send_ns ? now_ns - h.send_ns : 0);
    streams_.find_or_add(stream_key{lane, h.sender, h.stream}.packed())
        .observe(h.sequence, counts_);
    return h;
  }

  // A byte stream that stopped being GWP/1: nothing after it can be checked.
  void count_corrupt() noexcept { ++counts_.corrupt; }

  const traffic_counts& counts() const noexcept { return counts_; }
  // Send-to-receive times of the timed frames since the last reset_latency().
  const log_histogram& latency() const noexcept { return latency_; }
  void reset_latency() noexcept { latency_.reset(); }
  // The (lane, sender, stream) triples seen, and each one's next expected number.
  const stream_table& streams() const noexcept { return streams_; }

 private:
  traffic_counts counts_;
  stream_table streams_;
  log_histogram latency_;
};

}  // namespace gatewayd::traffic
