#include "consumers/ack_reader.hpp"

#include "protocol/control_message.hpp"

namespace gatewayd::consumers {

std::size_t ack_reader::next(std::string_view bytes, std::uint64_t& number,
                             ack_error& error) noexcept {
  if (bytes.empty()) return 0;
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
