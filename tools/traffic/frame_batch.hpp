// A sender's frames, encoded once and stamped in place before each write: frame i of the
// sender goes to address i mod k and is numbered in stream i mod k (mixed-address traffic),
// optionally with a numbered last token that spreads it over many distinct addresses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tools/traffic/payload_header.hpp"

namespace gatewayd::traffic {

class frame_batch {
 public:
  // `addresses`: 1..max_streams valid GWP/1 addresses (one is a plain single-address sender);
  // `payload_size` >= header_size. One next() returns at most `max_frames` frames and about
  // `max_bytes` (at least one frame). `flags`: byte 3 of every frame (0x01 asks the gateway to
  // confirm each one). `spread` > 0: every address gets a last token of spread_digits digits,
  // frame i's the number i mod spread (the index counted since renumber()), so that k
  // addresses become up to k x spread distinct ones without a frame each in memory.
  frame_batch(std::vector<std::string> addresses, std::size_t payload_size, std::uint16_t sender,
              std::size_t max_frames = 4096, std::size_t max_bytes = 256 * 1024,
              std::uint8_t flags = 0, std::uint32_t spread = 0);

  static constexpr std::size_t spread_digits = 8;
  static constexpr std::uint32_t max_spread = 100'000'000;  // what spread_digits can number

  // How many frames one next() may stamp.
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t streams() const noexcept { return addresses_.size(); }
  std::uint16_t sender() const noexcept { return sender_; }

  // Stamps the next n (1..capacity()) frames with `send_ns` and the next sequence number of
  // their stream, and returns their encoded bytes, back to back. A write that fails leaves
  // those numbers used: the receiver counts the frames as lost.
  std::string_view next(std::size_t n, std::uint64_t send_ns) noexcept;

  // A new connection: from now on the frames are `sender`'s, numbered from 0 in every stream
  // (order holds per connection, so each connection is a sender of its own).
  void renumber(std::uint16_t sender) noexcept;

  // Sequence numbers stamped so far in `stream` (its next frame's number).
  std::uint64_t stamped(std::size_t stream) const noexcept { return next_sequence_[stream]; }
  std::uint64_t stamped_total() const noexcept { return stamped_; }

  // The header next() stamps (or stamped) on the index-th frame since renumber(), sent at
  // `send_ns`: frame i goes to stream i mod k with number i / k.
  payload_header header_of(std::uint64_t index, std::uint64_t send_ns) const noexcept {
    const std::size_t k = addresses_.size();
    return {send_ns, index / k, static_cast<std::uint8_t>(index % k), sender_};
  }
  // Appends the frame stamped with `h` to `out`: byte for byte the frame next() gave with that
  // header, whatever has been stamped since (a resend the receiver can tell is a duplicate).
  void append_frame(std::string& out, const payload_header& h) const;

 private:
  // Writes the spread number of the index-th frame into the address that ends at `end`.
  void stamp_spread(char* end, std::uint64_t index) const noexcept;
  // next()'s frames are numbered in turn: the next one's digits, counted up in place (a
  // division per frame made the sender, not the gateway, the bound of a --spread run).
  void advance_spread() noexcept;

  std::vector<std::string> addresses_;
  std::uint16_t sender_;
  std::size_t capacity_ = 1;
  // Frames for streams 0..k-1 repeated, capacity + k - 1 of them, so a batch can start at any
  // stream: frame j starts at frame_at_[j]; its payload header at header_at_[j].
  std::string bytes_;
  std::vector<std::size_t> frame_at_;
  std::vector<std::size_t> header_at_;
  std::vector<std::uint64_t> next_sequence_;
  std::uint64_t stamped_ = 0;
  std::uint32_t spread_ = 0;
  char spread_digits_[spread_digits] = {'0', '0', '0', '0', '0', '0', '0', '0'};
  std::uint32_t spread_next_ = 0;  // the number spread_digits_ spell
};

}  // namespace gatewayd::traffic
