#include "consumers/ack_reader.hpp"

#include <cstring>
#include <string>

#include "protocol/control_message.hpp"

namespace gatewayd::consumers {

namespace {

// An ack frame's bytes before its number (header, address "ack"), as the codec writes them:
// a frame that starts with them is an ack, whatever number follows.
const std::string& ack_prefix() {
  static const std::string prefix = [] {
    std::string frame;
    protocol::append_control(frame, {protocol::control_message::kind::ack, 0});
    return frame.substr(0, frame.size() - 8);
  }();
  return prefix;
}

}  // namespace

std::size_t ack_reader::next(std::string_view bytes, std::uint64_t& number,
                             ack_error& error) noexcept {
  if (bytes.empty()) return 0;
  // The common case, at the cost of a compare: a whole ack.
  const std::string& prefix = ack_prefix();
  if (bytes.size() >= prefix.size() + 8 &&
      std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0) {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < 8; ++i)
      n = (n << 8) | static_cast<unsigned char>(bytes[prefix.size() + i]);
    number = n;
    return prefix.size() + 8;
  }
  // Only control frames pass, refused from their fourth byte on: a data frame (flags 0x00 or
  // 0x01) is told apart from garbage before its payload, however long, arrives.
  const auto r = protocol::parse_frame(bytes, 9, protocol::control_frames);
  if (r.state == protocol::parse_result::status::need_more) return 0;
  if (r.state == protocol::parse_result::status::error) {
    const auto flags = static_cast<std::uint8_t>(bytes[r.error_offset]);
    const bool data_frame =
        r.error == protocol::frame_error::bad_flags &&
        (flags == protocol::frame_flags::data || flags == protocol::frame_flags::confirm);
    error = data_frame ? ack_error::not_control : ack_error::bad_frame;
    return bytes.size();
  }
  const auto control = protocol::parse_control(r.frame);
  if (control.error == protocol::control_error::not_control) {
    error = ack_error::not_control;
  } else if (!control.message || control.message->what != protocol::control_message::kind::ack) {
    error = ack_error::not_ack;
  } else {
    number = control.message->number;
  }
  return r.frame.bytes.size();
}

}  // namespace gatewayd::consumers
