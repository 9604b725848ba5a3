// GWP/1's control messages (flags 0x80): the gateway's `confirm` and `reject` to a supplier that
// asked for confirmations, and an `ack = true` consumer's `ack`. A pure codec, no sockets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/frame_codec.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::protocol {

// Why a CONFIRM frame could not be settled for every consumer it was routed to: the reject's
// reason byte (1..4 on the wire) and the `reason` label of its metric.
enum class reject_reason : std::uint8_t {
  dropped = 1,        // an overflow policy dropped it for a consumer
  unroutable = 2,     // no route matched and there is no dead-letter consumer
  not_permitted = 3,  // its supplier may not publish to its address
  removed = 4,        // a reload removed a consumer it was routed to (a stop never rejects)
};
inline constexpr std::size_t reject_reason_count = 4;
inline constexpr runtime::enum_names<reject_reason, reject_reason_count + 1> reject_reason_names{
    {"none", "dropped", "unroutable", "not_permitted", "removed"}};
inline std::string_view to_string(reject_reason r) noexcept {
  return reject_reason_names(r);
}

struct control_message {
  enum class kind : std::uint8_t { confirm, reject, ack };
  kind what = kind::confirm;
  std::uint64_t number = 0;                       // confirm: N; reject: n; ack: N
  reject_reason reason = reject_reason::dropped;  // reject only

  friend bool operator==(const control_message&, const control_message&) = default;
};

// Why a CONTROL frame is not one of the messages (the `reason` label of the errors it counts).
enum class control_error : std::uint8_t {
  none,
  unknown_message,  // an address other than confirm, reject, ack
  bad_length,       // a payload that is not 8 bytes (9 for reject)
  bad_reason,       // a reject reason outside 1..4
  not_control,      // the frame's flags are not 0x80
};
inline constexpr runtime::enum_names<control_error, 5> control_error_names{
    {"none", "unknown_message", "bad_length", "bad_reason", "not_control"}};
inline std::string_view to_string(control_error e) noexcept {
  return control_error_names(e);
}

struct control_parse {
  std::optional<control_message> message;  // set when error == none
  control_error error = control_error::none;
};

// The message a whole frame (already parsed by parse_frame with control_frames) carries.
control_parse parse_control(const frame_view& frame) noexcept;

// The encoded size of each message: the header, its address, its 8 (or 9) payload bytes.
inline constexpr std::size_t confirm_size = header_size + 7 + 8;
inline constexpr std::size_t reject_size = header_size + 6 + 9;
inline constexpr std::size_t ack_size = header_size + 3 + 8;
inline constexpr std::size_t max_control_size = confirm_size;  // the largest of the three

// Writes `m` at `out` (room for max_control_size bytes); returns the bytes written. No
// allocation: the gateway encodes its confirms into a buffer of its own.
std::size_t encode_control(const control_message& m, char* out) noexcept;
// For tools and tests.
void append_control(std::string& out, const control_message& m);

}  // namespace gatewayd::protocol
