#include "suppliers/frame_stream.hpp"

#include <algorithm>
#include <cstring>

namespace gatewayd::suppliers {

frame_stream::buffer frame_stream::prepare() {
  const std::size_t pending = end_ - begin_;
  const std::size_t rest_of_frame = needed_ > pending ? needed_ - pending : 0;
  const std::size_t wanted_tail = std::max(rest_of_frame, min_read);
  if (!chunk_ || chunk_->capacity() - end_ < wanted_tail) {
    move_to_new_chunk(std::max(frame_chunk::standard_capacity, pending + wanted_tail));
  }
  return {chunk_->data() + end_, chunk_->capacity() - end_};
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

}  // namespace gatewayd::suppliers
