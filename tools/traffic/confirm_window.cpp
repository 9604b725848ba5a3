#include "tools/traffic/confirm_window.hpp"

#include <numeric>
#include <stdexcept>

namespace gatewayd::traffic {

confirm_window::confirm_window(std::size_t capacity) : ring_(capacity) {
  if (capacity == 0) throw std::invalid_argument("confirm_window: capacity must be at least 1");
}

void confirm_window::add(const payload_header& h) noexcept {
  at(size_) = entry{h, false};
  ++size_;
  ++sent_here_;
  ++numbered_here_;
  ++added_;
}

void confirm_window::resent(std::size_t n) noexcept {
  sent_here_ += n;
  numbered_here_ += n;
  resends_ += n;
}

confirm_fault confirm_window::on_message(const protocol::control_message& m) noexcept {
  using kind = protocol::control_message::kind;
  if (m.what == kind::ack) return confirm_fault::not_for_a_supplier;
  if (m.what == kind::reject) {
    if (m.number <= confirmed_here_ || m.number > numbered_here_)
      return confirm_fault::reject_out_of_range;
    entry& e = at(static_cast<std::size_t>(m.number - confirmed_here_ - 1));
    if (e.rejected) return confirm_fault::rejected_twice;
    e.rejected = true;
    ++rejected_held_;
    ++rejected_[static_cast<std::size_t>(m.reason) - 1];
    return confirm_fault::none;
  }
  if (m.number < confirmed_here_) return confirm_fault::confirm_went_back;
  if (m.number > numbered_here_) return confirm_fault::confirm_ahead;
  // Everything up to N is settled: the front of the ring, in order.
  for (std::uint64_t n = confirmed_here_; n < m.number; ++n) {
    entry& e = at(0);
    if (e.rejected)
      --rejected_held_;
    else
      ++confirmed_;
    head_ = (head_ + 1) % ring_.size();
    --size_;
    --sent_here_;
  }
  confirmed_here_ = m.number;
  return confirm_fault::none;
}

void confirm_window::new_connection() noexcept {
  // Keep the unsettled frames in their order, at the front of the ring.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < size_; ++i) {
    if (at(i).rejected) continue;
    if (kept != i) at(kept) = at(i);
    ++kept;
  }
  size_ = kept;
  rejected_held_ = 0;
  sent_here_ = 0;
  numbered_here_ = 0;
  confirmed_here_ = 0;
}

std::uint64_t confirm_window::rejected() const noexcept {
  return std::accumulate(rejected_.begin(), rejected_.end(), std::uint64_t{0});
}

}  // namespace gatewayd::traffic
