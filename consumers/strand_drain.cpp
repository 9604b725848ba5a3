#include "consumers/strand_drain.hpp"

#include "consumers/consumer.hpp"

namespace gatewayd::consumers {

void strand_drain::start() {
  asio::post(c_.strand_, [self = c_.shared_from_this(), this] { next(); });
}

void strand_drain::resume(std::uint64_t /*conn*/) {
  next();
}

void strand_drain::next() {
  bool more = false;
  {
    std::lock_guard lock(c_.mutex_);
    more = c_.take_batch_locked(batch_, conn_);
    if (c_.below_low_water_locked()) c_.paused_.release_locked();
  }
  c_.paused_.resume_released();
  if (more) return write();
  c_.check_drain();
}

// One write_some per step, not asio::async_write: the rest of a cut batch is written by this
// drain's own next step, not by a composed operation whose steps are continuations (see
// runtime/lf_pool.cpp on what Leader/Followers must do for those).
void strand_drain::write() {
  c_.link_.socket().async_write_some(
      batch_.unwritten(), [self = c_.shared_from_this(), this](std::error_code ec, std::size_t n) {
        on_written(ec, n);
      });
}

void strand_drain::on_written(std::error_code ec, std::size_t n) {
  c_.count_sent(batch_.written(n));
  // Before deciding on the next batch: a broken link must not get another write.
  if (ec && ec != asio::error::operation_aborted) c_.link_.lost(conn_, ec);
  if (!ec && !batch_.empty() && c_.link_.up(conn_)) return write();
  // The frame cut by an error and everything after it go back to the front of the queue, to
  // be sent whole on the next connection (or away, if the disconnect policy fired).
  c_.settle_rest(batch_);
  next();
}

}  // namespace gatewayd::consumers
