#include "harness_consumer.hpp"

#include <poll.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "net/gathered_send.hpp"

namespace gatewayd::harness {
namespace {

// What one strand turn writes before it yields the thread (as the product's strand drain).
constexpr std::uint64_t turn_bytes = 4 * consumers::write_batch::max_bytes;

// Takes `lock`, adding the time it waited (only when it had to) to `waited_ns`.
void lock_timed(std::unique_lock<std::mutex>& lock, std::atomic<std::uint64_t>& waited_ns) {
  if (lock.try_lock()) return;
  const auto t0 = std::chrono::steady_clock::now();
  lock.lock();
  waited_ns.fetch_add(static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count()),
                      std::memory_order_relaxed);
}

}  // namespace

harness_consumer::harness_consumer(const runtime::executor& ex,
                                   const consumers::consumer_spec& spec, drain_kind drain,
                                   std::chrono::milliseconds slow_after)
    : name_(spec.name),
      endpoint_(spec.address),
      drain_(drain),
      slow_after_(slow_after),
      strand_(runtime::make_strand(ex)),
      socket_(strand_),
      grace_timer_(strand_),
      queue_(spec.queue_capacity),
      limits_{spec.queue_capacity, spec.queue_bytes, spec.overflow} {}

void harness_consumer::connect() {
  std::error_code ec;
  const asio::ip::tcp::endpoint at(asio::ip::make_address(endpoint_.host, ec), endpoint_.port);
  if (!ec) socket_.connect(at, ec);
  if (ec) {
    throw std::runtime_error("consumer " + name_ + ": cannot connect to " + endpoint_.to_string() +
                             ": " + ec.message());
  }
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  // Both drains write with sendmsg(MSG_DONTWAIT); only the strand drain waits on the reactor.
  socket_.non_blocking(true, ec);
}

// ---------------------------------------------------------------------------------------------
// put: any thread

void harness_consumer::put(std::span<const frame_slice> frames,
                           const std::shared_ptr<flow_listener>& supplier) {
  if (frames.empty()) return;
  protocol::release_batch refused;  // declared first: released after the unlock
  consumers::admission a;
  bool start_writer = false;
  {
    std::unique_lock lock(mutex_, std::defer_lock);
    lock_timed(lock, counters_.blocked_lock_ns);
    a = consumers::admit(queue_, frames, limits_, nullptr, flow_ == flow::congested, nullptr,
                         refused);
    if (must_pause_locked()) {
      supplier->hold();
      paused_.push_back(supplier);
      counters_.pauses.fetch_add(1, std::memory_order_relaxed);
    }
    // The mutex drain writes in every caller; the strand drain has one writer at a time.
    if (!queue_.empty() && (drain_ == drain_kind::mutex || !writing_)) {
      start_writer = true;
      writing_ = drain_ == drain_kind::strand;
    }
    counters_.queued.store(queue_.size(), std::memory_order_relaxed);
  }
  for (std::size_t i = 0; i < a.drops.size(); ++i) {
    if (a.drops[i]) counters_.dropped[i].fetch_add(a.drops[i], std::memory_order_relaxed);
  }
  if (start_writer) {
    if (drain_ == drain_kind::mutex) {
      write_blocking();
    } else {
      // Runs right here when the strand is idle and this is a thread of the io_context (one
      // hop); from a Half-Sync/Half-Async worker it goes back to the I/O thread.
      asio::dispatch(strand_, [self = shared_from_this()] { self->run_strand(); });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The flow state

void harness_consumer::set_flow_locked(flow next) {
  if (next == flow_) return;
  const flow before = std::exchange(flow_, next);
  // Transitions other than to keeping_up come from the strand drain; so does the timer.
  if (next == flow::refusing) {
    grace_timer_.expires_after(slow_after_);
    grace_timer_.async_wait(
        [self = shared_from_this()](std::error_code ec) { self->on_grace_timer(ec); });
  } else if (before == flow::refusing) {
    grace_timer_.cancel();
  }
}

bool harness_consumer::must_pause_locked() const noexcept {
  const bool full = consumers::at_limit(queue_, limits_);
  if (limits_.policy == consumers::overflow_policy::backpressure && full) return true;
  switch (flow_) {
    case flow::keeping_up:
      return consumers::above_high_water(queue_, limits_);  // the gateway is behind
    case flow::refusing:
      return full;  // the consumer is behind, in its grace: its limits hold the suppliers
    case flow::congested:
      break;  // its policy drops
  }
  return false;
}

bool harness_consumer::may_resume_locked() const noexcept {
  bool caught_up = true;
  switch (flow_) {
    case flow::keeping_up:
      caught_up = consumers::below_low_water(queue_, limits_);
      break;
    case flow::refusing:
      caught_up = consumers::below_half_limits(queue_, limits_);
      break;
    case flow::congested:
      break;
  }
  if (limits_.policy != consumers::overflow_policy::backpressure) return caught_up;
  return caught_up && consumers::below_half_limits(queue_, limits_);
}

harness_consumer::paused_list harness_consumer::resumable_locked() {
  if (paused_.empty() || !may_resume_locked()) return {};
  return std::exchange(paused_, {});
}

void harness_consumer::socket_refused() {
  paused_list resume;
  {
    std::lock_guard lock(mutex_);
    if (flow_ != flow::keeping_up) return;
    set_flow_locked(flow::refusing);
    resume = resumable_locked();
  }
  for (const auto& s : resume)
    s->release();
}

void harness_consumer::on_grace_timer(std::error_code ec) {
  // A wait that completed just before a cancel or a re-arm is not this grace's end.
  if (ec || grace_timer_.expiry() > std::chrono::steady_clock::now()) return;
  paused_list resume;
  {
    std::lock_guard lock(mutex_);
    if (flow_ != flow::refusing) return;
    set_flow_locked(flow::congested);
    resume = resumable_locked();
  }
  for (const auto& s : resume)
    s->release();
}

// ---------------------------------------------------------------------------------------------
// The writers

bool harness_consumer::take_batch_locked() {
  if (!queue_.empty()) {
    batch_.fill(queue_);
    counters_.queued.store(queue_.size(), std::memory_order_relaxed);
    return true;
  }
  writing_ = false;
  set_flow_locked(flow::keeping_up);
  return false;
}

bool harness_consumer::next_batch() {
  paused_list resume;
  bool more = false;
  {
    std::lock_guard lock(mutex_);
    more = take_batch_locked();
    resume = resumable_locked();
  }
  for (const auto& s : resume)
    s->release();
  return more;
}

void harness_consumer::count_sent(const consumers::frame_counts& sent) noexcept {
  if (sent.frames) counters_.sent.fetch_add(sent.frames, std::memory_order_relaxed);
}

void harness_consumer::run_strand() {
  std::uint64_t turn = 0;
  for (;;) {
    if (batch_.empty() && !next_batch()) return;
    std::error_code ec;
    const std::uint64_t offered = batch_.unwritten_bytes();
    const std::size_t n = net::gathered_send(socket_.native_handle(), batch_.unwritten(), ec);
    count_sent(batch_.written(n));
    // A full socket: wait until the kernel has room instead of writing it a sliver at a time.
    if (net::socket_full(ec) || (!ec && n < offered)) {
      socket_refused();
      return wait_writable();
    }
    if (ec) fail("write", ec);
    turn += n;
    if (turn >= turn_bytes && batch_.empty()) {
      asio::post(strand_, [self = shared_from_this()] { self->run_strand(); });
      return;
    }
  }
}

void harness_consumer::wait_writable() {
  socket_.async_wait(asio::ip::tcp::socket::wait_write,
                     [self = shared_from_this()](std::error_code ec) {
                       if (ec) self->fail("wait for room", ec);
                       self->run_strand();
                     });
}

void harness_consumer::write_blocking() {
  std::unique_lock writer(writer_, std::defer_lock);
  lock_timed(writer, counters_.blocked_lock_ns);
  const int fd = socket_.native_handle();
  std::uint64_t write_ns = 0;
  while (next_batch()) {
    const auto t0 = std::chrono::steady_clock::now();
    while (!batch_.empty()) {
      std::error_code ec;
      const std::size_t n = net::gathered_send(fd, batch_.unwritten(), ec);
      if (net::socket_full(ec)) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      if (ec) fail("write", ec);
      count_sent(batch_.written(n));
    }
    write_ns += static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count());
  }
  counters_.blocked_write_ns.fetch_add(write_ns, std::memory_order_relaxed);
}

void harness_consumer::fail(std::string_view what, std::error_code ec) {
  // Benchmark code: there is no redial, and a run whose consumer left measures nothing.
  std::fprintf(stderr, "model-harness: consumer %s: %.*s failed: %s; exiting\n", name_.c_str(),
               static_cast<int>(what.size()), what.data(), ec.message().c_str());
  std::_Exit(1);
}

}  // namespace gatewayd::harness
