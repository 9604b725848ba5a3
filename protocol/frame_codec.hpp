// GWP/1 wire format: a pure, allocation-free frame parser and an encoder (no sockets here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "protocol/address.hpp"
#include "runtime/enum_names.hpp"

namespace gatewayd::protocol {

inline constexpr std::size_t header_size = 10;
inline constexpr std::uint32_t default_max_payload = 1u << 20;
inline constexpr unsigned char magic_0 = 0x47;  // 'G'
inline constexpr unsigned char magic_1 = 0x57;  // 'W'
inline constexpr unsigned char protocol_version = 0x01;

// Why a byte stream is not GWP/1. The names are the `reason` label of the protocol-error metric.
enum class frame_error : std::uint8_t {
  none,
  bad_magic,
  bad_version,
  bad_flags,
  empty_address,
  address_too_long,
  bad_address,
  payload_too_large,
};
inline constexpr runtime::enum_names<frame_error, 8> frame_error_names{
    {"none", "bad_magic", "bad_version", "bad_flags", "empty_address", "address_too_long",
     "bad_address", "payload_too_large"}};
inline constexpr std::size_t frame_error_count = frame_error_names.count;
inline std::string_view to_string(frame_error e) noexcept {
  return frame_error_names(e);
}

// Byte 3 of a frame. A data frame carries 0x00; a supplier may ask for a confirmation (CONFIRM,
// 0x01, a data frame all the same); CONTROL frames (0x80) are the confirm/reject/ack messages of
// protocol/control_message.hpp, never routed. Any other value is a protocol error.
namespace frame_flags {
inline constexpr std::uint8_t data = 0x00;
inline constexpr std::uint8_t confirm = 0x01;
inline constexpr std::uint8_t control = 0x80;
}  // namespace frame_flags

// Which of the defined flags a reader accepts where it reads: the others are bad_flags.
struct flag_policy {
  bool data = true;
  bool confirm = false;
  bool control = false;
  constexpr bool accepts(std::uint8_t flags) const noexcept {
    return flags == frame_flags::data      ? data
           : flags == frame_flags::confirm ? confirm
           : flags == frame_flags::control ? control
                                           : false;
  }
};
// The byte of a frame's header that holds its flags.
inline constexpr std::size_t flags_offset = 3;
// A CONFIRM frame is forwarded as the data frame it also is: its flags byte becomes 0x00 in
// place (consumers always receive flags 0x00). `frame`: a frame's first byte, header_size
// writable bytes.
void clear_confirm_flag(char* frame) noexcept;

// What a supplier may send the gateway, and what a consumer receives from it.
inline constexpr flag_policy supplier_frames{true, true, false};
inline constexpr flag_policy data_frames{true, false, false};
// What the gateway sends a supplier that asks for confirms, and what an `ack = true` consumer
// sends back: control messages only.
inline constexpr flag_policy control_frames{false, false, true};

// One whole frame, as views into the caller's buffer.
struct frame_view {
  std::string_view address;
  std::string_view payload;
  std::string_view bytes;  // the exact frame as received: header, address, payload
  std::uint8_t flags = frame_flags::data;
};

// The outcome of looking at the start of a buffer that begins on a frame boundary.
struct parse_result {
  enum class status : std::uint8_t { frame, need_more, error };
  status state = status::need_more;
  frame_view frame{};                // state == frame
  std::size_t needed = header_size;  // state == need_more: bytes the whole frame (or at
                                     // least its header) needs; never above the limit
  frame_error error = frame_error::none;
  std::size_t error_offset = 0;  // state == error: offset of the offending byte in buf
};

// Parses the frame at the start of `buf`. Errors are reported as early as the bytes allow
// (a bad magic after one byte, a flag `accept` refuses, an oversized payload from the header
// alone), so a hostile length is refused before anything is allocated for it.
// `checked_address`: an address known to be valid (the previous frame's); the bytes this
// frame's address shares with it at the start are not checked again (a supplier's addresses
// often differ in their last token only).
parse_result parse_frame(std::string_view buf, std::uint32_t max_payload,
                         flag_policy accept = data_frames,
                         std::string_view checked_address = {}) noexcept;

// The address of a whole frame that parse_frame() accepted (what a queue holds): the bytes
// its header's length field names. Empty for bytes too short to be one.
std::string_view frame_address(std::string_view frame) noexcept;

// Appends one encoded frame to `out`; for tools and tests (the gateway forwards data frames,
// never encodes them; it encodes only control messages, control_message.hpp).
void append_frame(std::string& out, std::string_view address, std::string_view payload,
                  std::uint8_t flags = frame_flags::data);
std::string encode_frame(std::string_view address, std::string_view payload,
                         std::uint8_t flags = frame_flags::data);

}  // namespace gatewayd::protocol
