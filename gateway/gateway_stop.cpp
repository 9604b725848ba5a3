// How the daemon stops: SIGINT/SIGTERM, an optional lame duck in which a balancer notices the
// node is leaving and its suppliers are asked to leave, the drain of every consumer, its hard
// deadline, and a second signal that cuts it all short.
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "gateway/gateway.hpp"
#include "runtime/log.hpp"

namespace gatewayd::gateway {

using std::chrono::steady_clock;

// On the signal watch's strand. At most one reload runs (on control_) and one waits: a SIGHUP that
// finds one waiting is served by it, since that one reads the files after this signal came. Signals
// stay watched through a stop, so that a second SIGINT/SIGTERM can end the drain at once.
void gateway::on_signal(int signo) {
  const char* name = signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" : "SIGHUP";
  if (signo == SIGHUP) {
    if (!stop_requested_.load()) reloader_->on_sighup();
  } else if (!stop_requested_.exchange(true)) {
    reloader_->stop();
    GW_LOG(info) << "received " << name << "; shutting down";
    asio::post(control_, [this] { begin_shutdown(); });
  } else {
    GW_LOG(warning) << "received " << name << " again; stopping now, without waiting for the drain";
    asio::post(control_, [this] { cut_drain_short(); });
  }
}

void gateway::shutdown() {
  stop_requested_.store(true);
  reloader_->stop();
  asio::post(control_, [this] { begin_shutdown(); });
}

bool gateway::enter(lifecycle next) {
  if (next <= state_) return false;
  state_ = next;
  switch (next) {
    case lifecycle::starting:
      break;
    case lifecycle::serving:
      listener_->start();
      serving_.listening.store(true);
      break;
    case lifecycle::lame_duck:  // /readyz answers 503; suppliers are still accepted and read
      serving_.draining.store(true);
      reloader_->stop();
      break;
    case lifecycle::suppliers_leaving:
      listener_->stop();
      serving_.listening.store(false);
      break;
    case lifecycle::draining:  // nothing new comes in; the consumers' queues go out
      stop_timer_.cancel();
      listener_->stop();
      serving_.draining.store(true);
      serving_.listening.store(false);
      // Read no more: those owed nothing close now, those owed confirms at the latest with the
      // drain (finish_shutdown), leaving what did not settle unsettled.
      listener_->sessions().for_each([](suppliers::supplier_session& s) { s.stop_reading(); });
      break;
    case lifecycle::stopped:
      break;
  }
  return true;
}

// With lame_duck_ms = 0 the drain starts at once. Otherwise /readyz answers 503 from here on
// while the listener still accepts and every supplier is still read, so a balancer's health
// check takes the node out before anything is refused.
void gateway::begin_shutdown() {
  if (!enter(lifecycle::lame_duck)) return;
  // Whatever happens to the lame duck, the drain or the pool's threads, the stop ends by
  // lame_duck_ms + drain_timeout_ms + stop_grace: kept by a thread of its own, which nothing on
  // the pool can hold up. The consumers are its own copy: consumers_ belongs to this strand.
  const bool armed = deadline_.arm(
      steady_clock::now() + service_.lame_duck + service_.drain_timeout + stop_grace -
          stop_leave_grace,
      stop_leave_grace,
      {[this, left = consumers_.running()] { force_stop(left); }, [this] { abandon_stop(); }});
  if (!armed) {
    GW_LOG(error) << "cannot start the stop deadline's thread: this stop has no hard deadline";
  }
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
  if (!enter(lifecycle::suppliers_leaving)) return;
  const auto now = steady_clock::now();
  drain_deadline_ = now + service_.drain_timeout;
  GW_LOG(info) << "lame duck over: listener closed; asking " << listener_->sessions().size()
               << " supplier(s) to leave (half-close), waiting up to "
               << service_.drain_timeout.count() / 2 << " ms";
  listener_->sessions().for_each([](suppliers::supplier_session& s) { s.ask_to_leave(); });
  wait_for_suppliers(now + service_.drain_timeout / 2);
}

// Polled: the registry changes on every connect and close, and nothing else needs to know.
void gateway::wait_for_suppliers(steady_clock::time_point leave_by) {
  const std::size_t left = listener_->sessions().size();
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
  if (!enter(lifecycle::draining)) return;
  std::string status = "stopping: draining ";
  status += std::to_string(consumers_.size());
  status += " consumer queues for up to ";
  status += std::to_string(within.count());
  status += " ms";
  notify_.stopping(status);
  consumers_.drain(within, [this](std::uint64_t undelivered) { finish_shutdown(undelivered); });
}

// A second signal: a lame duck ends, suppliers are no longer waited for, and every consumer's
// drain deadline becomes now. Each closes at once (a write still out is cancelled first) and
// reports what it leaves, as a drain that timed out does.
void gateway::cut_drain_short() {
  begin_shutdown();                               // nothing, if it began
  drain_consumers(std::chrono::milliseconds(0));  // nothing, if it began
  // Also after the running consumers drained: those a reload removed may still be draining.
  consumers_.cut_short();
}

// On the deadline's thread: the stop is not over by lame_duck_ms + drain_timeout_ms and most of
// stop_grace, so something holds the pool that the drain deadline could not end. What was left
// is read from atomics only (the strands' state may be held by a stuck thread); then the pool
// is stopped. The stop was asked for, so the exit status stays 0; the error says it was forced.
void gateway::force_stop(const std::vector<std::shared_ptr<consumers::consumer>>& consumers) {
  std::uint64_t queued = 0;
  for (const auto& c : consumers) {
    const auto n = c->stats().queued_frames.load();
    queued += n;
    if (n) {
      GW_LOG(error) << "stop forced: consumer " << c->name() << ": " << n << " frames queued";
    }
  }
  GW_LOG(error) << "stop forced: not over within lame_duck_ms + drain_timeout_ms + "
                << (stop_grace - stop_leave_grace).count() << " ms; left: " << queued
                << " frames queued for " << consumers.size() << " consumer(s), "
                << supplier_stats_.connections.load()
                << " supplier connection(s) open; stopping the threads (exit status 0)";
  pool_.stop();
}

// On the deadline's thread: stop_leave_grace after force_stop() a pool thread is still inside
// a handler that does not return (blocked in a system call, say). Nothing is left to wait for.
void gateway::abandon_stop() {
  GW_LOG(error) << "stop forced: the threads did not leave within " << stop_leave_grace.count()
                << " ms (one is blocked); exiting now (exit status 0)";
  log::flush_suppressed(log::rate_limit::clock::time_point::max());
  ::_exit(0);
}

void gateway::finish_shutdown(std::uint64_t undelivered) {
  enter(lifecycle::stopped);
  GW_LOG(info) << "drain finished: " << undelivered << " frames undelivered";
  // The counters' last values, which no scrape can read once the process is gone: with the
  // other nodes' and the consumers', they account for every frame a fleet was sent.
  const auto& in = supplier_stats_;
  GW_LOG(info) << "totals: " << in.frames_received.load() << " frames received from suppliers, "
               << in.unroutable.load() << " unroutable";
  consumers_.log_totals();
  stop_timer_.cancel();
  signals_.close();
  listener_->sessions().for_each([](suppliers::supplier_session& s) { s.stop(); });
  // The pings go on through the drain (it may outlast WatchdogSec) and stop only here; a
  // notification still waiting for room in systemd's socket would keep the pool alive.
  watchdog_.stop();
  notify_.stop();
  log_flush_.stop();
  memory_check_.stop();
  // With the acceptor, sessions, consumers, signals, watcher and watchdog closed, the io_context
  // runs out of work and the pool's threads leave on their own.
}

}  // namespace gatewayd::gateway
