// libFuzzer target: the incremental GWP/1 decoder fed arbitrary bytes in arbitrary pieces must
// agree, frame for frame and error for error, with the one-shot parser over the whole input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/frame_reference.hpp"

using namespace gatewayd::fuzz;

// Input layout: byte 0 picks max_payload; bytes 1..4 are the read sizes, used in turn (a read
// of up to 4 KiB, or of everything prepare() offers when the byte is 0); the rest is the stream.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  const std::uint32_t max_payload = payload_limits[data[0] % std::size(payload_limits)];
  const std::uint8_t* pieces = data + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data + 5), size - 5);

  checked_stream s(stream, max_payload);
  for (std::size_t turn = 0; !s.done(); ++turn) {
    const std::uint8_t p = pieces[turn % 4];
    s.read(p == 0 ? 0 : std::size_t{p} * 16 + turn % 7 + 1);
  }
  s.check_end();
  return 0;
}
