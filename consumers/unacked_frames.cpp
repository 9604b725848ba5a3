#include "consumers/unacked_frames.hpp"

namespace gatewayd::consumers {

unacked_frames::~unacked_frames() {
  // The consumer abandons what it holds before it goes (consumer_acks::abandon_all); anything
  // left here goes with the gateway, unsettled.
  protocol::reject_slices(all(), std::nullopt);
}

void unacked_frames::push_back(std::span<const protocol::frame_slice> written) {
  // Compacting before growing: an acknowledged front is reused instead of growing past it.
  if (head_ && frames_.size() + written.size() > frames_.capacity()) {
    frames_.erase(frames_.begin(), frames_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  frames_.insert(frames_.end(), written.begin(), written.end());
  for (const auto& f : written)
    bytes_ += f.size;
  written_ += written.size();
}

ack_error unacked_frames::acknowledge(std::uint64_t n, std::size_t& covered) noexcept {
  covered = 0;
  if (n < acked_) return ack_error::ack_decreasing;
  if (n > written_) return ack_error::ack_too_high;
  // Frames held are all of this connection once it was written to (redeliver_on), and before
  // that written_ is 0.
  covered = static_cast<std::size_t>(n - acked_);
  acked_ = n;
  return ack_error::none;
}

std::uint64_t unacked_frames::pop_front(std::size_t n) noexcept {
  std::uint64_t gone = 0;
  for (const auto& f : front(n))
    gone += f.size;
  bytes_ -= gone;
  head_ += n;
  if (head_ == frames_.size()) {
    frames_.clear();
    head_ = 0;
  }
  return gone;
}

}  // namespace gatewayd::consumers
