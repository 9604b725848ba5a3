// What an `ack = true` consumer sends back, read as GWP/1 control frames: its `ack N` messages,
// or the first thing that is not one (a protocol error: the connection is closed).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/address.hpp"
#include "protocol/frame_codec.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::consumers {

// Why an `ack = true` consumer's connection was closed for what it sent. The names are the
// `reason` label of gatewayd_consumer_protocol_errors_total.
enum class ack_error : std::uint8_t {
  none,
  bad_frame,       // not a GWP/1 frame (bad magic, version, flags, length...)
  not_control,     // a data frame (flags other than 0x80)
  not_ack,         // a control message other than ack (confirm, reject, unknown, bad length)
  ack_decreasing,  // an ack below the previous one on this connection
  ack_too_high,    // an ack above the frames written on this connection
};
inline constexpr runtime::enum_names<ack_error, 6> ack_error_names{
    {"none", "bad_frame", "not_control", "not_ack", "ack_decreasing", "ack_too_high"}};
inline constexpr std::size_t ack_error_count = ack_error_names.count;
inline std::string_view to_string(ack_error e) noexcept {
  return ack_error_names(e);
}

// One per connection (reset() for the next). Not thread-safe: the link's strand reads into it.
class ack_reader {
 public:
  // The largest control frame: a header, the longest address, a 9-byte payload. Anything
  // longer is refused from its header alone.
  static constexpr std::size_t max_frame = protocol::header_size + protocol::max_address_length + 9;

  // Where the next read puts its bytes (never empty while no error was found).
  std::span<char> free_space() noexcept { return std::span<char>(buffer_).subspan(end_); }
  // `n` bytes were read into free_space(): the acks among them, in order, go to `on_ack`
  // (bool(std::uint64_t): false stops, as an error the caller reports); the first thing that
  // is not a well-formed ack is returned (none: all read, maybe part of a frame kept).
  template <typename OnAck>
  ack_error received(std::size_t n, OnAck&& on_ack) {
    end_ += n;
    std::size_t at = 0;
    ack_error result = ack_error::none;
    while (result == ack_error::none) {
      std::uint64_t number = 0;
      const std::size_t used =
          next(std::string_view(buffer_.data() + at, end_ - at), number, result);
      if (!used) break;
      at += used;
      if (result == ack_error::none && !on_ack(number)) break;
    }
    // The unparsed rest (part of a frame) moves to the front for the next read.
    std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(at),
              buffer_.begin() + static_cast<std::ptrdiff_t>(end_), buffer_.begin());
    end_ -= at;
    return result;
  }
  void reset() noexcept { end_ = 0; }

 private:
  // The frame at the start of `bytes`: its size (0: incomplete) and its ack number, or an
  // error (then a nonzero size, to stop).
  static std::size_t next(std::string_view bytes, std::uint64_t& number, ack_error& error) noexcept;

  std::array<char, max_frame> buffer_{};
  std::size_t end_ = 0;
};

}  // namespace gatewayd::consumers
