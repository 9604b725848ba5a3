#include "runtime/lf_pool.hpp"

#include <algorithm>
#include <string>

#include "runtime/thread_count.hpp"
#include "runtime/thread_name.hpp"

namespace gatewayd::runtime {
namespace {
thread_local lf_pool* this_pool = nullptr;
thread_local void* this_member = nullptr;

// Tells the core this is a spin-wait: cheaper for a hyperthread sibling, and no memory-order
// mis-speculation when the flag flips.
inline void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

lf_pool::lf_pool(asio::io_context& ioc, unsigned threads, latency_histogram& latency,
                 std::chrono::microseconds idle_poll)
    : ioc_(ioc),
      thread_count_(thread_count(threads)),
      idle_poll_(idle_poll),
      promotion_latency_(latency) {
  followers_.reserve(thread_count_);
}

lf_pool::~lf_pool() {
  stop();
  join();
}

void lf_pool::start() {
  threads_.reserve(thread_count_);
  for (unsigned i = 0; i < thread_count_; ++i)
    threads_.emplace_back([this, i] { run_thread(i); });
}

void lf_pool::stop() {
  std::lock_guard lock(mutex_);
  if (done_) return;
  ioc_.stop();  // wakes a leader blocked inside run_one()
  end_locked();
}

void lf_pool::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void lf_pool::end_locked() {
  done_ = true;
  for (member* f : followers_)
    f->wake.notify_one();
}

void lf_pool::promote_new_leader() noexcept {
  lf_pool* pool = this_pool;
  if (!pool) return;
  auto& me = *static_cast<member*>(this_member);
  if (me.leading) pool->hand_over(me);
}

void lf_pool::hand_over(member& me) noexcept {
  me.leading = false;
  std::lock_guard lock(mutex_);
  ++processing_;
  if (followers_.empty()) {
    // Nobody idle: the first thread to finish its event becomes the leader.
    has_leader_ = false;
    ++no_follower_;
    return;
  }
  member* next = followers_.back();
  followers_.pop_back();
  next->promoted_at = std::chrono::steady_clock::now();
  next->promoted.store(true, std::memory_order_release);
  pending_ = next;
  if (next->parked) next->wake.notify_one();
}

// The promoted follower has not run yet (its wake-up is still on its way, or the scheduler has
// not given it a CPU) and this thread, done with its event, is running: it leads again and the
// follower goes back to the stack. Without this, on a busy machine, the next event waits in
// the kernel for a thread that is runnable but not running while the thread that could take it
// goes to sleep. The handle set went unwatched from the promotion until now: that is what the
// promotion latency measures, whichever thread ends the gap.
void lf_pool::take_back_leadership() {
  member* promoted = pending_;
  pending_ = nullptr;
  promoted->promoted.store(false, std::memory_order_relaxed);
  followers_.push_back(promoted);
  ++taken_back_;
  promotion_latency_.observe(std::chrono::steady_clock::now() - promoted->promoted_at);
}

void lf_pool::run_thread(unsigned index) {
  name_this_thread(("gw-lf-" + std::to_string(index)).c_str());
  member me;
  me.index = index;
  this_pool = this;
  this_member = &me;
  std::unique_lock lock(mutex_);
  while (!done_) {
    if (pending_ != nullptr) {
      take_back_leadership();
    } else if (has_leader_) {
      followers_.push_back(&me);
      if (!await_promotion(me, lock)) {
        std::erase(followers_, &me);
        break;
      }
      me.promoted.store(false, std::memory_order_relaxed);
      pending_ = nullptr;
      // Promotion latency: from the old leader seeing its event to this thread about to wait.
      promotion_latency_.observe(std::chrono::steady_clock::now() - me.promoted_at);
    } else {
      has_leader_ = true;
    }
    me.leading = true;
    lock.unlock();
    const std::size_t handled = run_one_event();
    if (handled && !me.leading) run_stranded_continuations();
    lock.lock();
    if (me.leading) {
      // Nothing of ours ran (a completion internal to Asio, such as a readiness event for a
      // socket with no operation pending) or a handler bypassed runtime::executor: leadership
      // is still ours; give it up here so the loop takes it again or hands it on.
      me.leading = false;
      has_leader_ = false;
    } else {
      --processing_;
    }
    if (handled == 0) {
      // The io_context ran out of work or was stopped: the pool is finished.
      end_locked();
    }
  }
  this_pool = nullptr;
  this_member = nullptr;
}

// Watching the flag first means a promotion that comes within idle_poll_ costs the old leader
// one store and this thread no wake-up; only then does it sleep on the condition variable
// (hand_over notifies only a parked member, under the mutex, so no wake-up is lost).
bool lf_pool::await_promotion(member& me, std::unique_lock<std::mutex>& lock) {
  if (idle_poll_.count() > 0) {
    lock.unlock();
    const auto until = std::chrono::steady_clock::now() + idle_poll_;
    while (!me.promoted.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < until) {
      relax();
    }
    lock.lock();
  }
  me.parked = true;
  me.wake.wait(lock, [&] { return me.promoted.load(std::memory_order_relaxed) || done_; });
  me.parked = false;
  return me.promoted.load(std::memory_order_relaxed);
}

// poll_one() asks epoll with a zero timeout: an event that arrives while the leader polls is
// handled without the thread ever sleeping and being woken for it.
std::size_t lf_pool::run_one_event() {
  if (idle_poll_.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + idle_poll_;
    do {
      if (const std::size_t n = ioc_.poll_one()) return n;
    } while (std::chrono::steady_clock::now() < until && !ioc_.stopped());
  }
  return ioc_.run_one();
}

// An event's handler that started a composed operation's next step (asio::async_write, an
// SSL stream) or deferred work queued it as a continuation: Asio keeps continuations in the
// calling thread's private queue and moves them to the shared queue when run_one() returns,
// without waking anyone. This thread handed the leadership on before it processed the event, so
// the leader may be asleep in epoll_wait with that work ready, and nothing else may ever wake it.
// Run ready work here until there is none: each poll_one() can strand the next step of a chain
// the same way, so no fixed number of rounds is enough.
void lf_pool::run_stranded_continuations() {
  while (ioc_.poll_one() != 0) {
  }
}

bool lf_pool::idle_thread_waiting() const noexcept {
  return this_pool == this && processing_.load(std::memory_order_relaxed) < thread_count_;
}

unsigned lf_pool::member_index() const noexcept {
  return this_pool == this ? static_cast<const member*>(this_member)->index : not_a_member;
}

bool lf_pool::this_thread_leads() noexcept {
  return this_pool && static_cast<member*>(this_member)->leading;
}

lf_pool::role_counts lf_pool::roles() const {
  std::lock_guard lock(mutex_);
  role_counts r;
  r.leader = has_leader_ ? 1 : 0;
  r.processing = processing_.load(std::memory_order_relaxed);
  r.follower = static_cast<unsigned>(followers_.size());
  return r;
}

std::uint64_t lf_pool::leadership_taken_back() const {
  std::lock_guard lock(mutex_);
  return taken_back_;
}

std::uint64_t lf_pool::promotions_without_follower() const {
  std::lock_guard lock(mutex_);
  return no_follower_;
}

}  // namespace gatewayd::runtime
