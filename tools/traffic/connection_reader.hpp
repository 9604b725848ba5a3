// One received connection's byte stream, checked: each read is cut into whole GWP/1 frames
// (a partial one waits for the next read) and every frame is recorded in a verifier.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <system_error>
#include <utility>

#include "protocol/frame_stream.hpp"
#include "tools/traffic/verifier.hpp"

namespace gatewayd::traffic {

class connection_reader {
 public:
  static constexpr std::uint32_t default_max_payload = 256u << 20;

  // Frames go to `v` on `lane` (see verifier::record).
  connection_reader(verifier& v, std::uint32_t lane,
                    std::uint32_t max_payload = default_max_payload)
      : verifier_(v), lane_(lane), stream_(max_payload) {}

  enum class state { open, closed, corrupt };

  // One read() from `fd`, then on_frame(frame_view, optional<payload_header>) for each whole
  // frame it completed, all stamped as received at `now_ns`. `closed`: end of stream or a read
  // error (in `ec`); `corrupt`: the bytes stopped being GWP/1 (counted; see error()), so
  // nothing more of this connection can be trusted. A read that would block is `open`.
  template <class OnFrame>
  state read_some(int fd, std::uint64_t now_ns, OnFrame&& on_frame, std::error_code& ec) {
    return read_with([fd](void* b, std::size_t n) { return ::read(fd, b, n); }, now_ns,
                     std::forward<OnFrame>(on_frame), ec);
  }

  // The same with `read(buffer, size)` in place of ::read() on a socket (a TLS layer's), with
  // the same results and errno.
  template <class Read, class OnFrame>
  state read_with(Read&& read, std::uint64_t now_ns, OnFrame&& on_frame, std::error_code& ec) {
    ec.clear();
    const auto space = stream_.prepare();
    const ssize_t n = read(space.data, space.size);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return state::open;
    if (n <= 0) {
      if (n < 0) ec = {errno, std::system_category()};
      return state::closed;
    }
    stream_.commit(static_cast<std::size_t>(n));
    error_ = stream_.parse([&](const protocol::frame_view& f, const protocol::frame_slice&) {
      on_frame(f, verifier_.record(f.payload, now_ns, lane_));
    });
    if (!error_) return state::open;
    verifier_.count_corrupt();
    return state::corrupt;
  }

  // Bytes of an unfinished frame are waiting: a frame cut if the connection ends here.
  bool has_partial() const noexcept { return stream_.has_partial(); }
  // Why and where (stream byte offset) the stream stopped being GWP/1.
  const protocol::frame_stream::stream_error& error() const noexcept { return error_; }

 private:
  verifier& verifier_;
  std::uint32_t lane_;
  protocol::frame_stream stream_;
  protocol::frame_stream::stream_error error_;
};

}  // namespace gatewayd::traffic
