#include "gateway/signal_watch.hpp"

#include <csignal>
#include <utility>

namespace gatewayd::gateway {

signal_watch::signal_watch(const runtime::executor& executor)
    : signals_(executor), strand_(runtime::make_strand(executor)) {}

void signal_watch::take() {
  signals_.add(SIGINT);
  signals_.add(SIGTERM);
  signals_.add(SIGHUP);
}

// Before the threads start: nothing else touches the watch yet.
void signal_watch::start(std::function<void(int)> on_signal) {
  on_signal_ = std::move(on_signal);
  wait();
}

// On strand_ (or from start()), like every use of signals_.
void signal_watch::wait() {
  if (closed_) return;
  signals_.async_wait(asio::bind_executor(strand_, [this](std::error_code ec, int signo) {
    if (ec) return;
    on_signal_(signo);
    wait();
  }));
}

void signal_watch::close() {
  asio::post(strand_, [this] {
    closed_ = true;
    std::error_code ignored;
    signals_.cancel(ignored);
  });
}

}  // namespace gatewayd::gateway
