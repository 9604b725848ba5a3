// SIGINT, SIGTERM and SIGHUP for the daemon: each handed over one at a time, on a strand of
// its own (never queued behind a reload on the control strand: a SIGHUP storm is read as fast
// as it comes and folds into the one reload queued), from when they are taken until the close.
#pragma once

#include <asio.hpp>
#include <functional>

#include "runtime/executor.hpp"

namespace gatewayd::gateway {

class signal_watch {
 public:
  explicit signal_watch(const runtime::executor& executor);

  // From here on the signals are the process's to handle, not to die of (a SIGHUP during
  // start-up must not end it); they wait for start().
  void take();
  // Calls on_signal(signo) for each signal, on the watch's strand, until close(). Signals stay
  // watched through a stop, so that a second SIGINT/SIGTERM can cut it short.
  void start(std::function<void(int)> on_signal);
  // Any thread: no signal is handed over once the close has run on the strand. Posted there,
  // after any wait a handler is re-arming: a cancel from another thread could come first, find
  // nothing to cancel and leave the pool a wait that never ends (the second-SIGTERM stop hung
  // in 1 of 5 runs when it did).
  void close();

 private:
  void wait();

  asio::signal_set signals_;
  runtime::strand strand_;
  std::function<void(int)> on_signal_;
  bool closed_ = false;  // on strand_
};

}  // namespace gatewayd::gateway
