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

// One whole frame, as views into the caller's buffer.
struct frame_view {
  std::string_view address;
  std::string_view payload;
  std::string_view bytes;  // the exact frame as received: header, address, payload
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
// (a bad magic after one byte, an oversized payload from the header alone), so a hostile
// length is refused before anything is allocated for it.
parse_result parse_frame(std::string_view buf, std::uint32_t max_payload) noexcept;

// Appends one encoded frame to `out`; for tools and tests (the gateway forwards, never encodes).
void append_frame(std::string& out, std::string_view address, std::string_view payload);
std::string encode_frame(std::string_view address, std::string_view payload);

}  // namespace gatewayd::protocol
