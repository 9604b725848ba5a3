// Where a consumer's written frames go: settled at once, or held until acknowledged.
#include "consumers/consumer_acks.hpp"

namespace gatewayd::consumers {

frame_counts consumer_acks::hold_written(write_batch& batch, std::size_t n) {
  const auto written = batch.take_written(n);
  if (!written.slices.empty()) {
    unacked_.push_back(written.slices);
    publish();
  }
  return written.counts();
}

ack_error consumer_acks::acknowledge(std::uint64_t n, std::size_t& covered) {
  // The link passes on only acks of the connection up, and connection_up() restarted the count.
  if (const auto e = unacked_.acknowledge(n, covered); e != ack_error::none) return e;
  if (covered) {
    if (observer_) observer_(unacked_.front(covered));
    protocol::deliver_slices(unacked_.front(covered), &stats_.confirms_settled);
    unacked_.pop_front(covered);
    publish();
  }
  return ack_error::none;
}

frame_counts consumer_acks::redeliver_to(frame_queue& queue, std::uint64_t conn) {
  if (!unacked_.redeliver_on(conn)) return {};
  const auto held = unacked_.all();
  queue.push_front_batch(held);  // the references move with the frames
  const frame_counts moved{held.size(), unacked_.pop_front(held.size())};
  stats_.redelivered_frames.fetch_add(moved.frames, std::memory_order_relaxed);
  publish();
  return moved;
}

void consumer_acks::hand_over(std::vector<frame_slice>& out) {
  if (unacked_.empty()) return;
  const auto held = unacked_.all();
  out.insert(out.end(), held.begin(), held.end());
  unacked_.pop_front(held.size());  // the references move with the frames
  publish();
}

std::size_t consumer_acks::abandon_all(protocol::give_up why) noexcept {
  const std::size_t n = unacked_.size();
  protocol::reject_slices(unacked_.all(), why, &stats_.confirms_settled);
  unacked_.pop_front(n);
  publish();
  return n;
}

void consumer_acks::publish() noexcept {
  stats_.unacked_frames.store(unacked_.size(), std::memory_order_relaxed);
  stats_.unacked_bytes.store(unacked_.bytes(), std::memory_order_relaxed);
}

}  // namespace gatewayd::consumers
