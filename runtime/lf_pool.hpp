// The Leader/Followers thread pool: one leader waits on the io_context for the next event,
// promotes a follower, then processes that event in its own thread (POSA2, over Asio).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/latency_histogram.hpp"

namespace gatewayd::runtime {

class lf_pool {
 public:
  struct role_counts {
    unsigned leader = 0;      // waiting for the next event (0 or 1, never more)
    unsigned processing = 0;  // handling an event after handing leadership on
    unsigned follower = 0;    // waiting to be promoted
  };

  // `idle_poll`: how long a thread that has nothing to do keeps looking before it sleeps, as
  // the leader (polling the io_context) and as a follower (watching for its promotion). A
  // sleeping thread costs a kernel wake-up, tens of µs on a VM, when the next event comes: at
  // high event rates polling takes that off every event's path, for CPU time while idle.
  lf_pool(asio::io_context& ioc, unsigned threads, latency_histogram& promotion_latency,
          std::chrono::microseconds idle_poll = {});
  ~lf_pool();
  lf_pool(const lf_pool&) = delete;
  lf_pool& operator=(const lf_pool&) = delete;

  void start();
  // Ends the pool even if the io_context still has work (the normal way out is to let the
  // io_context run out of work: the leader then sees run_one() return 0 and wakes everyone).
  void stop();
  // Waits for every thread to leave; the pool cannot be started again.
  void join();

  // The first act of every gateway handler (runtime::executor calls it; nothing else should):
  // if the calling thread is the leader, hand leadership to the most recently idle follower
  // before processing the event. A no-op on threads that are not leading or not in a pool.
  static void promote_new_leader() noexcept;
  // True while the calling thread is the leader of its pool: inside a handler this must be
  // false (tests check it per handler kind).
  static bool this_thread_leads() noexcept;
  // True when the calling thread is one of this pool's and another of its threads is idle
  // (leading or following): work posted now starts at once, beside the caller. False on any
  // other thread. No lock. (What the supplier sessions ask it through: idle_thread_probe.)
  bool idle_thread_waiting() const noexcept;
  // The calling thread's place in this pool, 0 .. size() - 1, fixed for the thread's life;
  // not_a_member on any other thread. No lock: what a part that keeps one of something per
  // thread (suppliers::frame_routers) finds the calling thread's by.
  static constexpr unsigned not_a_member = ~0u;
  unsigned member_index() const noexcept;

  role_counts roles() const;
  unsigned size() const noexcept { return thread_count_; }
  // Promotions that found no idle follower (every thread was busy processing).
  std::uint64_t promotions_without_follower() const;
  // Promotions ended by the old leader leading again because the promoted follower had not
  // started to run when the old leader's event was done.
  std::uint64_t leadership_taken_back() const;

 private:
  struct member {
    std::condition_variable wake;
    std::atomic<bool> promoted{false};  // set under mutex_; read spinning without it
    bool parked = false;                // asleep on `wake` (under mutex_): needs a notify
    bool leading = false;               // touched only by the member's own thread
    unsigned index = 0;                 // member_index()
    std::chrono::steady_clock::time_point promoted_at{};
  };

  void run_thread(unsigned index);
  // Follower: waits until promoted (true) or the pool ends (false). Called and returns with
  // `lock` held.
  bool await_promotion(member& me, std::unique_lock<std::mutex>& lock);
  // Leader: runs the next event's handler, polling for idle_poll_ before it blocks in epoll.
  std::size_t run_one_event();
  void hand_over(member& me) noexcept;
  void take_back_leadership();
  void run_stranded_continuations();
  void end_locked();

  asio::io_context& ioc_;
  const unsigned thread_count_;
  const std::chrono::nanoseconds idle_poll_;
  latency_histogram& promotion_latency_;

  mutable std::mutex mutex_;
  bool has_leader_ = false;
  bool done_ = false;
  // Written under mutex_; read without it by idle_thread_waiting().
  std::atomic<unsigned> processing_{0};
  std::uint64_t no_follower_ = 0;
  std::uint64_t taken_back_ = 0;
  // Promoted, not yet running as the leader (under mutex_): the leadership a thread that
  // finishes its event first takes back.
  member* pending_ = nullptr;
  std::vector<member*> followers_;  // a LIFO stack: back() is the most recently idle
  std::vector<std::thread> threads_;
};

}  // namespace gatewayd::runtime
