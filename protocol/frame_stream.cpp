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
  const std::size_t room = chunk_ ? chunk_->capacity() - end_ : 0;
  if (needed_ > frame_chunk::standard_capacity) {
    // A frame larger than a chunk: fill what we have, then move to a buffer twice what has
    // arrived, not to what the header announced (a peer that announces max_payload and sends
    // a few bytes costs a few bytes). Doubling keeps the copies of a frame that does arrive
    // under its own size in all. The last step leaves min_read of room after the frame.
    if (room < min_read) {
      const std::size_t capacity = 2 * pending + min_read >= needed_
                                       ? needed_ + min_read
                                       : std::max(frame_chunk::standard_capacity, 2 * pending);
      if (!move_to_new_chunk(capacity, capacity - frame_chunk::standard_capacity))
        return {nullptr, 0};
    }
  } else {
    const std::size_t rest_of_frame = needed_ > pending ? needed_ - pending : 0;
    const std::size_t wanted_tail = std::max(rest_of_frame, min_read);
    if (room < wanted_tail) {
      move_to_new_chunk(std::max(frame_chunk::standard_capacity, pending + wanted_tail), 0);
    }
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
    set_charge(0);
  }
  consumed_before_ += begin_;
  begin_ = end_ = 0;
}

bool frame_stream::move_to_new_chunk(std::size_t capacity, std::size_t charge) {
  if (!set_charge(charge)) return false;
  const std::size_t pending = end_ - begin_;
  chunk_ptr next(frame_chunk::acquire(capacity));
  if (pending) std::memcpy(next->data(), chunk_->data() + begin_, pending);
  consumed_before_ += begin_;
  chunk_ = std::move(next);
  begin_ = 0;
  end_ = pending;
  return true;
}

std::size_t frame_stream::learn_address(const char* address, std::size_t a) noexcept {
  const std::size_t shared =
      runtime::common_prefix(address, known_address_, std::min(a, known_address_length_));
  // A differing tail of token bytes (t.x.00000002 after t.x.00000001) is valid after any prefix
  // of a valid address. Calling nothing, this saves no registers either.
  std::size_t valid = shared;
  while (valid < a && is_token_char(static_cast<unsigned char>(address[valid])))
    ++valid;
  if (valid != a) return valid;
  // No tail: a prefix of the known address, valid unless it ends in its dot. Its first a - 1
  // bytes begin a valid address, so learn_checked_address() looks at the last one.
  if (shared == a) return a - 1;
  keep_address(address, a, shared);
  return a;
}

bool frame_stream::learn_checked_address(const char* address, std::size_t a,
                                         std::size_t valid) noexcept {
  if (first_bad_address_byte({address, a}, valid) != a) return false;
  keep_address(address, a, 0);
  return true;
}

bool frame_stream::set_charge(std::size_t bytes) noexcept {
  if (!budget_) return true;
  if (bytes > charged_ && !budget_->try_take(bytes - charged_)) return false;
  if (bytes < charged_) budget_->give_back(charged_ - bytes);
  charged_ = bytes;
  return true;
}

}  // namespace gatewayd::protocol
