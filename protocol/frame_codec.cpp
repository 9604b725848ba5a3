#include "protocol/frame_codec.hpp"

#include <algorithm>
#include <stdexcept>

#include "runtime/hash.hpp"

namespace gatewayd::protocol {
namespace {

std::uint32_t read_u32(const unsigned char* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

parse_result fail(frame_error e, std::size_t offset) noexcept {
  parse_result r;
  r.state = parse_result::status::error;
  r.error = e;
  r.error_offset = offset;
  return r;
}

parse_result more(std::size_t needed) noexcept {
  parse_result r;
  r.needed = needed;
  return r;
}

}  // namespace

parse_result parse_frame(std::string_view buf, std::uint32_t max_payload, flag_policy accept,
                         std::string_view checked_address) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  const std::size_t n = buf.size();
  // Check each fixed field as soon as its bytes are here: garbage is refused at once.
  if (n >= 1 && p[0] != magic_0) return fail(frame_error::bad_magic, 0);
  if (n >= 2 && p[1] != magic_1) return fail(frame_error::bad_magic, 1);
  if (n >= 3 && p[2] != protocol_version) return fail(frame_error::bad_version, 2);
  if (n >= 4 && !accept.accepts(p[3])) return fail(frame_error::bad_flags, 3);
  if (n >= 6 && p[4] == 0 && p[5] == 0) return fail(frame_error::empty_address, 4);
  if (n >= 6 && p[4] != 0) return fail(frame_error::address_too_long, 4);
  if (n < header_size) return more(header_size);

  const std::size_t address_length = p[5];
  const std::uint32_t payload_length = read_u32(p + 6);
  if (payload_length > max_payload) return fail(frame_error::payload_too_large, 6);

  const std::size_t frame_size = header_size + address_length + payload_length;
  if (n < header_size + address_length) return more(frame_size);
  const std::string_view address = buf.substr(header_size, address_length);
  const std::size_t shared = runtime::common_prefix(
      address.data(), checked_address.data(), std::min(address.size(), checked_address.size()));
  if (const auto bad = first_bad_address_byte(address, shared); bad != address.size()) {
    return fail(frame_error::bad_address, header_size + bad);
  }
  if (n < frame_size) return more(frame_size);

  parse_result r;
  r.state = parse_result::status::frame;
  r.frame.address = address;
  r.frame.payload = buf.substr(header_size + address_length, payload_length);
  r.frame.bytes = buf.substr(0, frame_size);
  r.frame.flags = p[3];
  r.needed = frame_size;
  return r;
}

void clear_confirm_flag(char* frame) noexcept {
  frame[flags_offset] = static_cast<char>(frame_flags::data);
}

std::string_view frame_address(std::string_view frame) noexcept {
  if (frame.size() < header_size) return {};
  const auto* p = reinterpret_cast<const unsigned char*>(frame.data());
  const std::size_t length = (std::size_t{p[4]} << 8) | p[5];
  if (header_size + length > frame.size()) return {};
  return frame.substr(header_size, length);
}

void append_frame(std::string& out, std::string_view address, std::string_view payload,
                  std::uint8_t flags) {
  if (address.empty() || address.size() > max_address_length) {
    throw std::invalid_argument("GWP/1 address length must be 1..255");
  }
  if (payload.size() > 0xffffffffu) throw std::invalid_argument("GWP/1 payload too large");
  const auto a = static_cast<std::uint16_t>(address.size());
  const auto len = static_cast<std::uint32_t>(payload.size());
  const char header[header_size] = {static_cast<char>(magic_0),
                                    static_cast<char>(magic_1),
                                    static_cast<char>(protocol_version),
                                    static_cast<char>(flags),
                                    static_cast<char>(a >> 8),
                                    static_cast<char>(a & 0xff),
                                    static_cast<char>(len >> 24),
                                    static_cast<char>((len >> 16) & 0xff),
                                    static_cast<char>((len >> 8) & 0xff),
                                    static_cast<char>(len & 0xff)};
  out.append(header, header_size);
  out.append(address);
  out.append(payload);
}

std::string encode_frame(std::string_view address, std::string_view payload, std::uint8_t flags) {
  std::string out;
  out.reserve(header_size + address.size() + payload.size());
  append_frame(out, address, payload, flags);
  return out;
}

}  // namespace gatewayd::protocol
