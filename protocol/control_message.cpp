#include "protocol/control_message.hpp"

namespace gatewayd::protocol {
namespace {

constexpr std::string_view confirm_address = "confirm";
constexpr std::string_view reject_address = "reject";
constexpr std::string_view ack_address = "ack";

std::uint64_t read_u64(const char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

char* write_u64(char* out, std::uint64_t v) noexcept {
  for (int i = 7; i >= 0; --i)
    *out++ = static_cast<char>(v >> (8 * i));
  return out;
}

control_parse failed(control_error e) noexcept {
  return {std::nullopt, e};
}

}  // namespace

control_parse parse_control(const frame_view& frame) noexcept {
  if (frame.flags != frame_flags::control) return failed(control_error::not_control);
  const std::string_view payload = frame.payload;
  if (frame.address == reject_address) {
    if (payload.size() != 9) return failed(control_error::bad_length);
    const auto reason = static_cast<unsigned char>(payload[8]);
    if (reason < 1 || reason > reject_reason_count) return failed(control_error::bad_reason);
    return {control_message{control_message::kind::reject, read_u64(payload.data()),
                            static_cast<reject_reason>(reason)},
            control_error::none};
  }
  control_message m;
  if (frame.address == confirm_address) {
    m.what = control_message::kind::confirm;
  } else if (frame.address == ack_address) {
    m.what = control_message::kind::ack;
  } else {
    return failed(control_error::unknown_message);
  }
  if (payload.size() != 8) return failed(control_error::bad_length);
  m.number = read_u64(payload.data());
  return {m, control_error::none};
}

std::size_t encode_control(const control_message& m, char* out) noexcept {
  const std::string_view address = m.what == control_message::kind::confirm  ? confirm_address
                                   : m.what == control_message::kind::reject ? reject_address
                                                                             : ack_address;
  const std::uint32_t payload = m.what == control_message::kind::reject ? 9 : 8;
  char* p = out;
  *p++ = static_cast<char>(magic_0);
  *p++ = static_cast<char>(magic_1);
  *p++ = static_cast<char>(protocol_version);
  *p++ = static_cast<char>(frame_flags::control);
  *p++ = 0;
  *p++ = static_cast<char>(address.size());
  *p++ = 0;
  *p++ = 0;
  *p++ = 0;
  *p++ = static_cast<char>(payload);
  p += address.copy(p, address.size());
  p = write_u64(p, m.number);
  if (m.what == control_message::kind::reject) *p++ = static_cast<char>(m.reason);
  return static_cast<std::size_t>(p - out);
}

void append_control(std::string& out, const control_message& m) {
  char buffer[max_control_size];
  out.append(buffer, encode_control(m, buffer));
}

}  // namespace gatewayd::protocol
