// libFuzzer target: the control messages of confirms and acks, as an `ack = true` consumer (or
// a hostile one) sends them: arbitrary bytes are parsed as a stream of CONTROL frames; each
// frame's message, when it is one, must encode back to the frame's exact bytes, and a frame
// that is no message must say why.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/check.hpp"
#include "protocol/control_message.hpp"

using namespace gatewayd::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const parse_result r = parse_frame(rest, 64, control_frames);
    if (r.state != parse_result::status::frame) break;
    const control_parse c = parse_control(r.frame);
    if (c.message) {
      gatewayd::fuzz::check(c.error == control_error::none);
      char encoded[max_control_size];
      const std::size_t n = encode_control(*c.message, encoded);
      gatewayd::fuzz::check(std::string_view(encoded, n) == r.frame.bytes);
    } else {
      gatewayd::fuzz::check(c.error != control_error::none);
      gatewayd::fuzz::check(c.error !=
                            control_error::not_control);  // the stream admitted only 0x80
    }
    rest.remove_prefix(r.frame.bytes.size());
  }
  return 0;
}
