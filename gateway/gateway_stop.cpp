// How the daemon stops: SIGINT/SIGTERM, the drain of every consumer, its hard deadline, and a
// second signal that cuts the drain short.
#include <csignal>

#include "gateway/gateway.hpp"
#include "runtime/log.hpp"

namespace gatewayd::gateway {

// On signal_strand_ (or before the threads start), like every use of signals_.
void gateway::wait_for_signal() {
  if (signals_closed_) return;
  signals_.async_wait(asio::bind_executor(signal_strand_, [this](std::error_code ec, int signo) {
    if (!ec) on_signal(signo);
  }));
}

// On signal_strand_. At most one reload runs (on control_) and one waits: a SIGHUP that finds
// one waiting is served by it, since that one reads the files after this signal came. Signals
// stay watched through a stop, so that a second SIGINT/SIGTERM can end the drain at once.
void gateway::on_signal(int signo) {
  const char* name = signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" : "SIGHUP";
  if (signo == SIGHUP) {
    if (!stop_requested_.load() && !reload_queued_.exchange(true)) {
      asio::post(control_, [this] {
        reload_queued_.store(false);
        if (watcher_) watcher_->reading(stamp_files(watched_files()));
        do_reload("SIGHUP");
      });
    }
  } else if (!stop_requested_.exchange(true)) {
    GW_LOG(info) << "received " << name << "; shutting down";
    asio::post(control_, [this] { begin_shutdown(); });
  } else {
    GW_LOG(warning) << "received " << name << " again; stopping now, without waiting for the drain";
    asio::post(control_, [this] { cut_drain_short(); });
  }
  wait_for_signal();
}

void gateway::shutdown() {
  stop_requested_.store(true);
  asio::post(control_, [this] { begin_shutdown(); });
}

void gateway::begin_shutdown() {
  if (shutting_down_) return;
  shutting_down_ = true;
  if (watcher_) watcher_->stop();
  acceptor_->stop();
  // No new frames come in while the queues drain: suppliers stay connected but unread.
  sessions_.for_each([](suppliers::supplier_session& s) { s.pause_reading(); });
  retirement_.stop(false);  // consumers a reload removed drain on their own deadlines
  draining_ = consumers_.size();
  std::string status = "stopping: draining ";
  status += std::to_string(draining_);
  status += " consumer queues for up to ";
  status += std::to_string(service_.drain_timeout.count());
  status += " ms";
  notify_.stopping(status);
  // Whatever happens to the drain, the stop ends by this deadline.
  stop_deadline_.expires_after(service_.drain_timeout + stop_grace);
  stop_deadline_.async_wait([this](std::error_code ec) {
    if (!ec) force_stop();
  });
  if (draining_ == 0) return finish_shutdown();
  for (auto& [name, c] : consumers_) {
    c->drain_and_close(service_.drain_timeout, consumers::drop_reason::shutdown,
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

// A second signal: every consumer's drain deadline becomes now. Each closes at once (a write
// still out is cancelled first) and reports what it leaves, as a drain that timed out does.
void gateway::cut_drain_short() {
  if (!shutting_down_) begin_shutdown();
  retirement_.stop(true);
  if (draining_ == 0) return;
  for (auto& [name, c] : consumers_)
    c->drain_and_close(std::chrono::milliseconds(0), consumers::drop_reason::shutdown, nullptr);
}

// The drain did not end by drain_timeout_ms plus stop_grace: something is stuck that the drain
// deadline could not end. Stop the threads; the process exits with an error.
void gateway::force_stop() {
  if (stopped_) return;
  forced_ = true;
  GW_LOG(error) << "the stop did not end within drain_timeout_ms + "
                << std::chrono::duration_cast<std::chrono::milliseconds>(stop_grace).count()
                << " ms (" << draining_ << " consumer(s) still draining); forcing it";
  model_->stop();
}

void gateway::finish_shutdown() {
  stopped_ = true;
  GW_LOG(info) << "drain finished: " << undelivered_ << " frames undelivered";
  stop_deadline_.cancel();
  // On the signal strand: on_signal re-arms the wait there after posting a stop, and a cancel
  // from here could come first and find nothing to cancel, leaving the pool a wait that never
  // ends (the second-SIGTERM stop hung in 1 of 5 runs).
  asio::post(signal_strand_, [this] {
    signals_closed_ = true;
    std::error_code ignored;
    signals_.cancel(ignored);
  });
  sessions_.for_each([](suppliers::supplier_session& s) { s.stop(); });
  // The pings go on through the drain (it may outlast WatchdogSec) and stop only here.
  watchdog_.stop();
  log_flush_.stop();
  // With the acceptor, sessions, consumers, signals, watcher and watchdog closed, the io_context
  // runs out of work and the pool's threads leave on their own.
}

}  // namespace gatewayd::gateway
