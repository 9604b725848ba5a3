// libFuzzer target: two suppliers' streams decoded on one thread, reads interleaved. They share
// the thread's parked chunk tail (frame_chunk::park_tail): one stream's frames may land in the
// chunk the other left, so each must still agree with the one-shot parser over its own bytes,
// and no slice of one may be overwritten by the other.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/frame_reference.hpp"

using namespace gatewayd::fuzz;

// Input layout: byte 0 picks max_payload; bytes 1..4 the read sizes (as frame_stream_fuzz);
// byte 5 the schedule (bit i: which stream reads at turn i, cycling); bytes 6..7 how many of
// the remaining bytes are stream A's (modulo their number); the rest is B's.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  const std::uint32_t max_payload = payload_limits[data[0] % std::size(payload_limits)];
  const std::uint8_t* pieces = data + 1;
  const std::uint8_t schedule = data[5];
  const std::string_view rest(reinterpret_cast<const char*>(data + 8), size - 8);
  const std::size_t split = (std::size_t{data[6]} << 8 | data[7]) % (rest.size() + 1);

  checked_stream streams[2] = {{rest.substr(0, split), max_payload},
                               {rest.substr(split), max_payload}};
  for (std::size_t turn = 0; !streams[0].done() || !streams[1].done(); ++turn) {
    int which = (schedule >> (turn % 8)) & 1;
    if (streams[which].done()) which ^= 1;
    const std::uint8_t p = pieces[turn % 4];
    streams[which].read(p == 0 ? 0 : std::size_t{p} * 16 + turn % 7 + 1);
  }
  streams[0].check_end();
  streams[1].check_end();
  return 0;
}
