// A consumer's end as a part of its own: where the end is (one asserted table), why it ends, the
// drain's deadline and the callers waiting to hear how many frames were left undelivered.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "consumers/consumer_stats.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::consumers {

// What the closing part asks of the consumer that owns it, on its strand.
class closing_owner {
 public:
  // Kept alive by the deadline's timer wait.
  virtual std::shared_ptr<void> keep_alive() = 0;
  // The drain is over (its deadline passed): the consumer closes with what it still holds.
  virtual void end_drain() = 0;

 protected:
  ~closing_owner() = default;
};

// Its life and end reason are read and changed under the owner's lock (put() asks them on every
// call); the deadline and the callers are the owner's strand's.
class consumer_closing {
 public:
  // Where its end is, in this order, forward only: open ─▶ draining (drain_and_close() was
  // called: frames routed to it by the table that still named it are taken, they are its own,
  // but nobody is paused) ─▶ closed (the drain ended: frames are refused, counted as ending()
  // says; a write may still be out) ─▶ done (the owner counted what was left and report()ed it).
  // Every change goes through enter(), which asserts this table (may_enter(): public for its
  // test; nothing else asks it).
  enum class life : std::uint8_t { open, draining, closed, done };
  static bool may_enter(life from, life to) noexcept;

  consumer_closing(const runtime::strand& strand, closing_owner& owner);

  // Under the owner's lock.
  life now() const noexcept { return life_; }
  // Why it drains: removed (a reload), or shutdown (a stop). What reaches it once closed, and
  // what is left at its end, is counted as this says.
  drop_reason ending() const noexcept { return ending_; }
  // The first call begins the drain (open ─▶ draining) with `why`; later calls change nothing.
  void begin(drop_reason why) noexcept;
  void enter(life next) noexcept;

  // Strand. Whether a drain runs: its deadline is set and callers wait for its end.
  bool armed() const noexcept { return armed_; }
  // `done` (if set) waits for the end; the deadline is set, or brought forward (a removal,
  // then a stop: the second shares the first drain).
  void arm(std::chrono::milliseconds timeout, std::function<void(std::uint64_t)> done);
  void cancel_deadline() { timer_.cancel(); }
  // Tells every caller, once, how many frames were left undelivered.
  void report(std::uint64_t undelivered);

 private:
  asio::steady_timer timer_;
  closing_owner& owner_;
  life life_ = life::open;
  drop_reason ending_ = drop_reason::removed;
  bool armed_ = false;
  std::chrono::steady_clock::time_point deadline_{};
  std::vector<std::function<void(std::uint64_t)>> done_;
};

}  // namespace gatewayd::consumers
