// The graceful stop of gateway (gateway.hpp), on the control strand: an optional lame duck in
// which a balancer notices the node is leaving, the suppliers asked to leave, then the drain.
#include <string>

#include "gateway/gateway.hpp"
#include "runtime/log.hpp"

namespace gatewayd::gateway {

using std::chrono::steady_clock;

// SIGTERM. With lame_duck_ms = 0 the drain starts at once, as it always did. Otherwise /readyz
// answers 503 from here on while the listener still accepts and every supplier is still read,
// so a balancer's health check takes the node out before anything is refused.
void gateway::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  serving_.draining.store(true);
  std::error_code ignored;
  signals_.cancel(ignored);
  if (watcher_) watcher_->stop();
  const auto lame_duck = service_.lame_duck;
  if (lame_duck.count() == 0) return drain_consumers(service_.drain_timeout);
  GW_LOG(info) << "lame duck for " << lame_duck.count()
               << " ms: /readyz answers 503, suppliers are still accepted and read";
  notify_.stopping("stopping: lame duck for " + std::to_string(lame_duck.count()) +
                   " ms (/readyz 503), then draining");
  stop_timer_.expires_after(lame_duck);
  stop_timer_.async_wait([this](std::error_code ec) {
    if (!ec) ask_suppliers_to_leave();
  });
}

// The lame duck is over: no new supplier, and each one connected is asked to leave with a
// half-close (it reads end-of-file). What it still sends is read and routed until it closes its
// side, so a supplier that moves to another node on end-of-file loses nothing here. Suppliers
// get half of drain_timeout_ms; the consumer queues the rest.
void gateway::ask_suppliers_to_leave() {
  acceptor_->stop();
  serving_.listening.store(false);
  const auto now = steady_clock::now();
  drain_deadline_ = now + service_.drain_timeout;
  GW_LOG(info) << "lame duck over: listener closed; asking " << sessions_.size()
               << " supplier(s) to leave (half-close), waiting up to "
               << service_.drain_timeout.count() / 2 << " ms";
  sessions_.for_each([](suppliers::supplier_session& s) { s.ask_to_leave(); });
  wait_for_suppliers(now + service_.drain_timeout / 2);
}

// Polled: the registry changes on every connect and close, and nothing else needs to know.
void gateway::wait_for_suppliers(steady_clock::time_point leave_by) {
  const std::size_t left = sessions_.size();
  if (left != 0 && steady_clock::now() < leave_by) {
    stop_timer_.expires_after(std::chrono::milliseconds(20));
    stop_timer_.async_wait([this, leave_by](std::error_code ec) {
      if (!ec) wait_for_suppliers(leave_by);
    });
    return;
  }
  if (left != 0) {
    GW_LOG(warning) << left << " supplier(s) did not leave in time; no longer reading them";
  } else {
    GW_LOG(info) << "every supplier left";
  }
  const auto rest =
      std::chrono::ceil<std::chrono::milliseconds>(drain_deadline_ - steady_clock::now());
  drain_consumers(std::max(rest, std::chrono::milliseconds(0)));
}

// Suppliers still connected stay so, unread (nothing new comes in, nothing is cut mid-frame);
// every consumer queue is sent for at most `within`.
void gateway::drain_consumers(std::chrono::milliseconds within) {
  acceptor_->stop();
  serving_.listening.store(false);
  sessions_.for_each([](suppliers::supplier_session& s) { s.pause_reading(); });
  draining_ = consumers_.size();
  std::string status = "stopping: draining ";
  status += std::to_string(draining_);
  status += " consumer queues for up to ";
  status += std::to_string(within.count());
  status += " ms";
  notify_.stopping(status);
  if (draining_ == 0) return finish_shutdown();
  for (auto& [name, c] : consumers_) {
    c->drain_and_close(within, consumers::drop_reason::shutdown,
                       [this, n = name](std::uint64_t left) {
                         asio::post(control_, [this, n, left] {
                           if (left) {
                             GW_LOG(warning) << "consumer " << n << ": " << left
                                             << " frames undelivered at shutdown";
                           }
                           undelivered_ += left;
                           if (--draining_ == 0) finish_shutdown();
                         });
                       });
  }
}

void gateway::finish_shutdown() {
  GW_LOG(info) << "drain finished: " << undelivered_ << " frames undelivered";
  // The counters' last values, which no scrape can read once the process is gone: with the
  // other nodes' and the consumers', they account for every frame a fleet was sent.
  const auto& in = supplier_stats_;
  GW_LOG(info) << "totals: " << in.frames_received.load() << " frames received from suppliers, "
               << in.unroutable.load() << " unroutable";
  for (const auto& [name, c] : consumers_) {
    GW_LOG(info) << "totals: consumer " << name << " sent " << c->stats().sent_frames.load()
                 << " frames, dropped " << c->stats().dropped_total();
  }
  sessions_.for_each([](suppliers::supplier_session& s) { s.stop(); });
  // The pings go on through the drain (it may outlast WatchdogSec) and stop only here.
  watchdog_.stop();
  // With the acceptor, sessions, consumers, signals, watcher and watchdog closed, the io_context
  // runs out of work and the pool's threads leave on their own.
}

}  // namespace gatewayd::gateway
