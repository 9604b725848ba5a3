// The bytes a peer reads back on a GWP/1 connection (a gateway's confirms and rejects to a
// supplier, a consumer's acks to a gateway), cut into control messages; the first byte that is
// not a well-formed one stops it, with the reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <string_view>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"

namespace gatewayd::traffic {

class control_inbox {
 public:
  struct buffer {
    char* data;
    std::size_t size;
  };
  // Room for the next read (never empty: a partial message is smaller than the buffer).
  buffer prepare() noexcept { return {bytes_.data() + used_, bytes_.size() - used_}; }
  void commit(std::size_t n) noexcept { used_ += n; }
  // A new connection: nothing of the last one is kept.
  void clear() noexcept { used_ = 0; }

  // Calls on_message(const control_message&) for each whole message read so far, and keeps a
  // partial one for the next read. Returns "" or why the bytes are not control messages (a
  // frame error or a control error, by its metric name); on_message may stop the parse by
  // returning a non-empty reason of its own, which is returned.
  template <class OnMessage>
  std::string_view parse(OnMessage&& on_message) {
    std::size_t at = 0;
    std::string_view fault;
    while (fault.empty()) {
      const auto r = protocol::parse_frame({bytes_.data() + at, used_ - at}, max_payload,
                                           protocol::control_frames);
      if (r.state == protocol::parse_result::status::need_more) break;
      if (r.state == protocol::parse_result::status::error) {
        fault = protocol::to_string(r.error);
        break;
      }
      const auto m = protocol::parse_control(r.frame);
      at += r.frame.bytes.size();
      fault = m.message ? on_message(*m.message) : protocol::to_string(m.error);
    }
    used_ -= at;
    std::memmove(bytes_.data(), bytes_.data() + at, used_);
    return fault;
  }

 private:
  // The largest payload a control message has (a reject's 9 bytes): a longer one is refused
  // from its header, before anything waits for it.
  static constexpr std::uint32_t max_payload = 9;

  std::array<char, 4096> bytes_{};
  std::size_t used_ = 0;
};

}  // namespace gatewayd::traffic
