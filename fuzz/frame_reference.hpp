// What the stream fuzzers check the incremental decoder against: parse_frame() over the whole
// input, frame after frame, and a way to feed a frame_stream one read as the session does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "fuzz/check.hpp"
#include "protocol/frame_codec.hpp"
#include "protocol/frame_stream.hpp"

namespace gatewayd::fuzz {

// Byte 0 of an input picks max_payload from these; frames over 64 KiB (a chunk) need the
// last two.
inline constexpr std::uint32_t payload_limits[] = {0, 1, 16, 300, 65536, 1u << 20};

struct reference_result {
  std::vector<std::string_view> frames;
  protocol::frame_error error = protocol::frame_error::none;
  std::uint64_t error_offset = 0;
};

inline reference_result reference_parse(std::string_view data, std::uint32_t max_payload) {
  using namespace protocol;
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

// One decoder fed its stream in reads, every frame it yields checked against the reference and
// held (with a chunk reference, as a consumer queue holds it) until the end.
class checked_stream {
 public:
  checked_stream(std::string_view stream, std::uint32_t max_payload)
      : stream_(stream), expected_(reference_parse(stream, max_payload)), fs_(max_payload) {}
  checked_stream(const checked_stream&) = delete;
  checked_stream& operator=(const checked_stream&) = delete;
  ~checked_stream() {
    for (auto& s : held_)
      s.chunk->release();
  }

  bool done() const noexcept { return fed_ == stream_.size() || err_; }

  // One read of up to `piece` bytes (0: all that prepare() offers), then parse and, as an idle
  // session does, release or park the chunk.
  void read(std::size_t piece) {
    using namespace protocol;
    const frame_stream::buffer b = fs_.prepare();
    check(b.size >= frame_stream::min_read);
    const std::size_t n = std::min({piece == 0 ? b.size : piece, b.size, stream_.size() - fed_});
    std::memcpy(b.data, stream_.data() + fed_, n);
    fs_.commit(n);
    fed_ += n;
    err_ = fs_.parse([&](const frame_view& f, const frame_slice& s) {
      check(held_.size() < expected_.frames.size());
      check(f.bytes == expected_.frames[held_.size()]);
      check(s.bytes() == f.bytes);
      s.chunk->add_refs(1);
      held_.push_back(s);
    });
    // Slices handed out earlier must stay intact while this stream (or another) moves on.
    if (!held_.empty()) check(held_.back().bytes() == expected_.frames[held_.size() - 1]);
    fs_.release_if_idle();
  }

  // Everything the reference found, and nothing else, with every held slice intact.
  void check_end() const {
    check(held_.size() == expected_.frames.size());
    check(err_.reason == expected_.error);
    if (err_) check(err_.offset == expected_.error_offset);
    if (!err_) {
      std::size_t whole = 0;
      for (auto f : expected_.frames)
        whole += f.size();
      check(fs_.offset() == whole);
      check(fs_.buffered() == stream_.size() - whole);
    }
    for (std::size_t i = 0; i < held_.size(); ++i)
      check(held_[i].bytes() == expected_.frames[i]);
  }

 private:
  std::string_view stream_;
  reference_result expected_;
  protocol::frame_stream fs_;
  std::vector<protocol::frame_slice> held_;
  std::size_t fed_ = 0;
  protocol::frame_stream::stream_error err_;
};

}  // namespace gatewayd::fuzz
