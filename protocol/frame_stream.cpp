#include "protocol/frame_stream.hpp"

#include <algorithm>
#include <cstring>

namespace gatewayd::protocol {

frame_stream::buffer frame_stream::prepare() {
  if (!chunk_) {
    // Continue in the tail another session parked on this thread; our stream offset is
    // kept by moving consumed_before_ back by where that tail starts (unsigned wrap is fine).
    std::size_t tail = 0;
    if (frame_chunk* c = frame_chunk::take_tail(std::max(needed_, min_read), tail)) {
      chunk_ = chunk_ptr(c);
      consumed_before_ -= tail;
      begin_ = end_ = tail;
    }
  }
  const std::size_t pending = end_ - begin_;
  const std::size_t rest_of_frame = needed_ > pending ? needed_ - pending : 0;
  const std::size_t wanted_tail = std::max(rest_of_frame, min_read);
  if (!chunk_ || chunk_->capacity() - end_ < wanted_tail) {
    move_to_new_chunk(std::max(frame_chunk::standard_capacity, pending + wanted_tail));
  }
  return {chunk_->data() + end_, chunk_->capacity() - end_};
}

void frame_stream::release_if_idle() noexcept {
  if (begin_ != end_) return;
  if (chunk_ && chunk_->capacity() == frame_chunk::standard_capacity &&
      chunk_->capacity() - end_ >= min_read) {
    frame_chunk::park_tail(chunk_.detach(), end_);
  } else {
    chunk_.reset();
  }
  consumed_before_ += begin_;
  begin_ = end_ = 0;
}

void frame_stream::move_to_new_chunk(std::size_t capacity) {
  const std::size_t pending = end_ - begin_;
  chunk_ptr next(frame_chunk::acquire(capacity));
  if (pending) std::memcpy(next->data(), chunk_->data() + begin_, pending);
  consumed_before_ += begin_;
  chunk_ = std::move(next);
  begin_ = 0;
  end_ = pending;
}

}  // namespace gatewayd::protocol
