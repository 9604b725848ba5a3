// libFuzzer target: the incremental GWP/1 decoder fed arbitrary bytes in arbitrary pieces must
// agree, frame for frame and error for error, with the one-shot parser over the whole input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "protocol/frame_stream.hpp"

using namespace gatewayd::protocol;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// The reference: parse_frame over the whole remaining input, frame after frame.
struct reference_result {
  std::vector<std::string_view> frames;
  frame_error error = frame_error::none;
  std::uint64_t error_offset = 0;
};

reference_result reference_parse(std::string_view data, std::uint32_t max_payload) {
  reference_result out;
  std::size_t pos = 0;
  while (pos < data.size()) {
    const parse_result r = parse_frame(data.substr(pos), max_payload);
    if (r.state == parse_result::status::need_more) {
      check(r.needed > data.size() - pos);
      check(r.needed <= header_size + max_address_length + std::uint64_t{max_payload});
      break;
    }
    if (r.state == parse_result::status::error) {
      out.error = r.error;
      out.error_offset = pos + r.error_offset;
      break;
    }
    check(r.frame.bytes.data() == data.data() + pos);
    check(r.frame.bytes.size() == header_size + r.frame.address.size() + r.frame.payload.size());
    check(valid_address(r.frame.address));
    check(r.frame.payload.size() <= max_payload);
    out.frames.push_back(r.frame.bytes);
    pos += r.frame.bytes.size();
  }
  return out;
}

}  // namespace

// Input layout: byte 0 picks max_payload; bytes 1..4 are the read sizes, used in turn (a read
// of up to 4 KiB, or of everything prepare() offers when the byte is 0); the rest is the stream.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  static constexpr std::uint32_t payload_limits[] = {0, 1, 16, 300, 65536, 1u << 20};
  const std::uint32_t max_payload = payload_limits[data[0] % std::size(payload_limits)];
  const std::uint8_t* pieces = data + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data + 5), size - 5);

  const reference_result expected = reference_parse(stream, max_payload);

  frame_stream fs(max_payload);
  std::vector<frame_slice> held;  // each owns one chunk reference, as a consumer queue would
  std::size_t delivered = 0;
  std::size_t fed = 0;
  frame_stream::stream_error err;
  for (std::size_t turn = 0; fed < stream.size() && !err; ++turn) {
    const frame_stream::buffer b = fs.prepare();
    check(b.size >= frame_stream::min_read);
    const std::uint8_t p = pieces[turn % 4];
    std::size_t n = p == 0 ? b.size : std::size_t{p} * 16 + turn % 7 + 1;
    n = std::min({n, b.size, stream.size() - fed});
    std::memcpy(b.data, stream.data() + fed, n);
    fs.commit(n);
    fed += n;
    err = fs.parse([&](const frame_view& f, const frame_slice& s) {
      check(delivered < expected.frames.size());
      check(f.bytes == expected.frames[delivered]);
      check(s.bytes() == f.bytes);
      s.chunk->add_refs(1);
      held.push_back(s);
      ++delivered;
    });
    // Slices handed out earlier must stay intact while the stream moves on.
    if (!held.empty()) check(held.back().bytes() == expected.frames[delivered - 1]);
    fs.release_if_idle();
  }
  check(delivered == expected.frames.size());
  check(err.reason == expected.error);
  if (err) check(err.offset == expected.error_offset);
  if (!err) {
    std::size_t whole = 0;
    for (auto f : expected.frames)
      whole += f.size();
    check(fs.offset() == whole);
    check(fs.buffered() == stream.size() - whole);
  }
  for (std::size_t i = 0; i < held.size(); ++i) {
    check(held[i].bytes() == expected.frames[i]);
    held[i].chunk->release();
  }
  return 0;
}
