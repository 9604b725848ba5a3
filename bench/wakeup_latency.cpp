// How long this machine takes to run a thread that another thread has just woken: the floor
// under the L/F pool's promotion latency (gatewayd_lf_promotion_latency_seconds), measured the
// way the pool promotes. `sleep`: the follower waits on a condition variable under a mutex and
// the leader notifies it (lf_pool::hand_over); `spin`: the follower watches a flag, as with
// idle_poll_us. No gatewayd code is involved: what this shows is the operating system's (and
// the hypervisor's) share, which no design of the pool can go below.
//
// Usage: wakeup_latency [--mode sleep|spin] [--rounds N] [--gap-us G]
//   --gap-us  pause before each wake-up (default 10: an event every 10 us is S4's 100k/s), so
//             that a sleeping follower is really asleep when it is woken.
// Run it on an idle machine, then beside a load (bench/run --scenarios S4) to see the tail that
// a busy 2-core machine adds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct options {
  bool spin = false;
  int rounds = 20000;
  int gap_us = 10;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--mode") {
      o.spin = std::strcmp(value, "spin") == 0;
    } else if (flag == "--rounds") {
      o.rounds = std::max(1, std::atoi(value));
    } else if (flag == "--gap-us") {
      o.gap_us = std::max(0, std::atoi(value));
    } else {
      std::fprintf(stderr, "usage: wakeup_latency [--mode sleep|spin] [--rounds N] [--gap-us G]\n");
      std::exit(2);
    }
  }
  return o;
}

double quantile_us(const std::vector<std::int64_t>& sorted_ns, double q) {
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted_ns.size() - 1));
  return static_cast<double>(sorted_ns[i]) / 1000.0;
}

double share_within_us(const std::vector<std::int64_t>& sorted_ns, double us) {
  const auto n =
      std::upper_bound(sorted_ns.begin(), sorted_ns.end(), static_cast<std::int64_t>(us * 1000.0)) -
      sorted_ns.begin();
  return 100.0 * static_cast<double>(n) / static_cast<double>(sorted_ns.size());
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::mutex mutex;
  std::condition_variable wake;
  bool parked = false;
  std::atomic<bool> promoted{false};
  std::atomic<bool> ready{false};
  std::atomic<std::int64_t> promoted_at{0};
  std::vector<std::int64_t> latency_ns;
  latency_ns.reserve(static_cast<std::size_t>(o.rounds));

  std::thread follower([&] {
    for (int r = 0; r < o.rounds; ++r) {
      if (o.spin) {
        ready.store(true, std::memory_order_release);
        while (!promoted.load(std::memory_order_acquire)) {
        }
      } else {
        std::unique_lock lock(mutex);
        ready.store(true, std::memory_order_release);
        parked = true;
        wake.wait(lock, [&] { return promoted.load(std::memory_order_acquire); });
        parked = false;
      }
      const std::int64_t now = clock_type::now().time_since_epoch().count();
      latency_ns.push_back(now - promoted_at.load(std::memory_order_relaxed));
      promoted.store(false, std::memory_order_relaxed);
    }
  });

  for (int r = 0; r < o.rounds; ++r) {
    while (!ready.load(std::memory_order_acquire))
      std::this_thread::yield();
    ready.store(false, std::memory_order_relaxed);
    if (o.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.gap_us));
    std::lock_guard lock(mutex);
    promoted_at.store(clock_type::now().time_since_epoch().count(), std::memory_order_relaxed);
    promoted.store(true, std::memory_order_release);
    if (parked) wake.notify_one();
  }
  follower.join();

  std::sort(latency_ns.begin(), latency_ns.end());
  std::printf(
      "%s, %d wake-ups, %d us apart: p50 %.1f us, p90 %.1f, p99 %.1f, p99.9 %.1f, max %.1f; "
      "within 20 us %.2f %%, 50 us %.2f %%, 100 us %.2f %%\n",
      o.spin ? "spin" : "sleep", o.rounds, o.gap_us, quantile_us(latency_ns, 0.5),
      quantile_us(latency_ns, 0.9), quantile_us(latency_ns, 0.99), quantile_us(latency_ns, 0.999),
      static_cast<double>(latency_ns.back()) / 1000.0, share_within_us(latency_ns, 20),
      share_within_us(latency_ns, 50), share_within_us(latency_ns, 100));
}
