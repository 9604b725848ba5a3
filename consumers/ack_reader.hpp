// What an `ack = true` consumer sends back, read as GWP/1 control frames: its `ack N` messages,
// or the first thing that is not one (a protocol error: the connection is closed).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "protocol/address.hpp"
#include "protocol/frame_codec.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// Why a consumer's connection was closed for what it sent. The names are the `reason` label of
// gatewayd_consumer_protocol_errors_total.
enum class ack_error : std::uint8_t {
  none,
  bad_frame,          // not a GWP/1 frame (bad magic, version, flags, length...)
  not_control,        // a data frame (flags other than 0x80)
  not_ack,            // a control message other than ack (confirm, reject, unknown, bad length)
  ack_decreasing,     // an ack below the previous one on this connection
  ack_too_high,       // an ack above the frames written on this connection
  ack_not_advancing,  // max_stalled_ack_bytes of acks in a row that moved nothing
  unsolicited_bytes,  // a consumer without `ack` sent more than a few KiB (consumer_link)
};
inline constexpr runtime::enum_names<ack_error, 8> ack_error_names{
    {"none", "bad_frame", "not_control", "not_ack", "ack_decreasing", "ack_too_high",
     "ack_not_advancing", "unsolicited_bytes"}};
inline constexpr std::size_t ack_error_count = ack_error_names.count;
inline std::string_view to_string(ack_error e) noexcept {
  return ack_error_names(e);
}

// One per connection (reset() for the next). Not thread-safe: the link's strand reads into it.
//
// Acks are cumulative, so of all the acks one read brings only the last counts: every one is
// checked (well-formed, none below the one before it), and the highest is passed on once. A
// consumer that floods acks costs one parse per ack (a compare and a load, not a codec pass) and
// one apply per read of buffer_size bytes, not one apply (a lock, a drain check) per ack. Acks
// that repeat the last number are allowed, but not without end: the reader counts them
// (stalled_bytes), and past max_stalled_ack_bytes in a row the link ends the connection
// (ack_not_advancing), so no consumer makes the gateway read forever (one repeating `ack 0` made
// it read 7.3 GB in 6 s, issue 42).
class ack_reader {
 public:
  // The largest control frame: a header, the longest address, a 9-byte payload. Anything
  // longer is refused from its header alone.
  static constexpr std::size_t max_frame = protocol::header_size + protocol::max_address_length + 9;
  // One read's room: some 3,000 acks. Held only by `ack = true` consumers' links.
  static constexpr std::size_t buffer_size = 64 * 1024;
  // Acks in a row that do not advance (some 50,000 of 21 bytes) before the connection ends: a
  // consumer that repeats its last ack on a timer while nothing new arrives stays far below it.
  static constexpr std::size_t max_stalled_ack_bytes = 1024 * 1024;

  ack_reader() : buffer_(std::make_unique<char[]>(buffer_size)) {}

  // Where the next read puts its bytes (never empty while no error was found).
  std::span<char> free_space() noexcept { return {buffer_.get() + end_, buffer_size - end_}; }
  // `n` bytes were read into free_space(). Each ack among them is checked; the highest of those
  // before the first error (if any) goes to `on_ack` (bool(std::uint64_t), called at most once:
  // its result is for the caller). Returns the first thing that is not a well-formed ack, or an
  // ack below the one before it (none: all read, maybe part of a frame kept).
  template <typename OnAck>
  ack_error received(std::size_t n, OnAck&& on_ack) {
    end_ += n;
    std::size_t at = 0;
    ack_error result = ack_error::none;
    std::uint64_t highest = last_;
    bool any = false;
    while (result == ack_error::none) {
      std::uint64_t number = 0;
      const std::size_t used =
          next(std::string_view(buffer_.get() + at, end_ - at), number, result);
      if (!used) break;
      at += used;
      if (result != ack_error::none) break;
      if (number < highest) {
        result = ack_error::ack_decreasing;
        break;
      }
      // Bytes of acks since one last moved the count (within this read, or across reads).
      stalled_ = number > highest ? 0 : stalled_ + used;
      highest = number;
      any = true;
    }
    // The unparsed rest (part of a frame) moves to the front for the next read.
    std::copy(buffer_.get() + at, buffer_.get() + end_, buffer_.get());
    end_ -= at;
    if (any) {
      last_ = highest;
      on_ack(highest);
    }
    return result;
  }
  // Bytes of acks, in a row, that did not advance the count.
  std::size_t stalled_bytes() const noexcept { return stalled_; }
  void reset() noexcept {
    end_ = 0;
    last_ = 0;
    stalled_ = 0;
  }

 private:
  // The frame at the start of `bytes`: its size (0: incomplete) and its ack number, or an
  // error (then a nonzero size, to stop).
  static std::size_t next(std::string_view bytes, std::uint64_t& number, ack_error& error) noexcept;

  std::unique_ptr<char[]> buffer_;
  std::size_t end_ = 0;
  std::uint64_t last_ = 0;   // the highest ack of this connection so far
  std::size_t stalled_ = 0;  // bytes of acks since the last one that advanced
};

}  // namespace gatewayd::consumers
