#include "runtime/periodic_timer.hpp"

namespace gatewayd::runtime {

periodic_timer::periodic_timer(const executor& ex, std::chrono::steady_clock::duration period,
                               std::function<void()> tick)
    : strand_(make_strand(ex)), timer_(strand_), period_(period), tick_(std::move(tick)) {}

void periodic_timer::start() {
  asio::post(strand_, [this] {
    if (stopped_) return;
    timer_.expires_after(period_);
    do_wait();
  });
}

void periodic_timer::stop() {
  asio::post(strand_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void periodic_timer::do_wait() {
  timer_.async_wait([this](std::error_code ec) {
    if (ec || stopped_) return;
    tick_();
    // Fixed rate, not fixed delay: a late tick does not push every later one back.
    timer_.expires_at(timer_.expiry() + period_);
    if (timer_.expiry() < asio::steady_timer::clock_type::now()) timer_.expires_after(period_);
    do_wait();
  });
}

}  // namespace gatewayd::runtime
