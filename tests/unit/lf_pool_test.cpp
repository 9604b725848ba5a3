#include <boost/test/unit_test.hpp>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/idle_thread_probe.hpp"
#include "runtime/lf_pool.hpp"
#include "tests/support/wait_until.hpp"

using gatewayd::runtime::idle_thread_probe;
using gatewayd::runtime::lf_pool;
using gatewayd::test::wait_until;
using namespace std::chrono_literals;

namespace {

struct observer {
  std::atomic<unsigned> processing{0};
  std::atomic<unsigned> max_processing{0};
  std::atomic<unsigned> max_leaders{0};
  std::atomic<unsigned> handled{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;

  void enter(const lf_pool& pool) {
    lf_pool::promote_new_leader();
    const auto roles = pool.roles();
    unsigned prev = max_leaders.load();
    while (roles.leader > prev && !max_leaders.compare_exchange_weak(prev, roles.leader)) {
    }
    const unsigned now = ++processing;
    prev = max_processing.load();
    while (now > prev && !max_processing.compare_exchange_weak(prev, now)) {
    }
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
  }
  void leave() {
    --processing;
    ++handled;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(one_leader_at_a_time_and_events_processed_concurrently) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 4, latency);
  observer obs;
  auto work = asio::make_work_guard(ioc);
  constexpr unsigned events = 400;
  for (unsigned i = 0; i < events; ++i) {
    asio::post(ioc, [&] {
      obs.enter(pool);
      std::this_thread::sleep_for(200us);  // an event that takes a while to process
      obs.leave();
    });
  }
  pool.start();
  BOOST_TEST_REQUIRE(wait_until([&] { return obs.handled == events; }, 5s));
  work.reset();
  pool.join();
  BOOST_TEST(obs.max_leaders.load() <= 1u);
  BOOST_TEST(obs.max_processing.load() >= 2u);  // processing overlaps on several threads
  BOOST_TEST(obs.threads.size() >= 2u);
}

BOOST_AUTO_TEST_CASE(roles_add_up_and_idle_threads_are_followers) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 3, latency);
  auto work = asio::make_work_guard(ioc);
  pool.start();
  BOOST_TEST(wait_until(
      [&] {
        const auto r = pool.roles();
        return r.leader == 1 && r.follower == 2 && r.processing == 0;
      },
      5s));
  work.reset();
  pool.stop();
  pool.join();
}

BOOST_AUTO_TEST_CASE(followers_are_promoted_most_recently_idle_first) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 3, latency);
  auto work = asio::make_work_guard(ioc);
  std::mutex m;
  std::vector<std::thread::id> order;
  // Sequential short events: with LIFO promotion the same warm thread pair keeps serving,
  // the third thread (least recently idle) stays parked at the bottom of the stack.
  // Each event starts from the same settled pool (one leader, two followers), however
  // slowly a loaded machine gets the threads there.
  auto settle = [&] {
    (void)wait_until(
        [&] {
          const auto r = pool.roles();
          return r.leader == 1 && r.follower == 2 && r.processing == 0;
        },
        2s, 50us);
  };
  pool.start();
  settle();
  for (int i = 0; i < 200; ++i) {
    std::atomic<bool> done{false};
    asio::post(ioc, [&] {
      lf_pool::promote_new_leader();
      std::lock_guard lock(m);
      order.push_back(std::this_thread::get_id());
      done = true;
    });
    while (!done)
      std::this_thread::yield();
    settle();
  }
  work.reset();
  pool.join();
  std::set<std::thread::id> used(order.begin(), order.end());
  BOOST_TEST(order.size() == 200u);
  BOOST_TEST(used.size() <= 2u);
  // Every event found an idle follower to promote, and each promotion was measured.
  BOOST_TEST(latency.read().count >= 200u);
  BOOST_TEST(pool.promotions_without_follower() == 0u);
}

// A promoted follower that has not started to run when the old leader's event is done (its
// wake-up still on its way, no CPU free for it) must not keep the next event waiting: the old
// leader leads again. All threads here share one CPU and each handler keeps it busy for less
// than a scheduler slice, so the woken follower usually runs only after the handler returned.
// Every promotion is still measured once, whoever ended it, and the roles stay consistent.
BOOST_AUTO_TEST_CASE(a_leader_done_before_its_promoted_follower_runs_leads_again) {
  cpu_set_t one{};
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  cpu_set_t before{};
  BOOST_TEST_REQUIRE(sched_getaffinity(0, sizeof before, &before) == 0);
  BOOST_TEST_REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);  // the pool's threads inherit
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 2, latency);
  observer obs;
  auto work = asio::make_work_guard(ioc);
  pool.start();
  constexpr unsigned events = 100;
  for (unsigned i = 0; i < events; ++i) {
    // Shared: a handler late past a failed wait must not write to a gone flag.
    auto done = std::make_shared<std::atomic<bool>>(false);
    asio::post(ioc, [&, done] {
      obs.enter(pool);
      const auto until = std::chrono::steady_clock::now() + 200us;
      while (std::chrono::steady_clock::now() < until) {
      }
      obs.leave();
      *done = true;
    });
    BOOST_TEST_REQUIRE(wait_until([&] { return done->load(); }, 10s, 100us));
  }
  (void)wait_until([&] { return pool.roles().processing == 0; }, 2s);
  const auto roles = pool.roles();
  const auto taken_back = pool.leadership_taken_back();
  work.reset();
  pool.stop();
  pool.join();
  sched_setaffinity(0, sizeof before, &before);
  BOOST_TEST(obs.handled.load() == events);
  BOOST_TEST(obs.max_leaders.load() <= 1u);
  BOOST_TEST(roles.leader + roles.processing + roles.follower == 2u);
  BOOST_TEST(taken_back > 0u, "no leader ever led again: " << taken_back);
  // Each event promoted once, measured once by whoever ended the promotion; an event that came
  // while the other thread was still finishing the last one found no follower.
  BOOST_TEST(latency.read().count + pool.promotions_without_follower() == events);
}

// A handler's continuation (a composed operation's next step, a defer) waits in its thread's
// private queue, which Asio moves to the shared queue without waking the leader. Here nothing
// else ever happens on the io_context, so only the pool itself can notice: a chain of deferred
// steps, each deferring the next, must still run to its end at once.
BOOST_AUTO_TEST_CASE(continuations_of_a_processed_event_are_never_stranded) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 2, latency);
  auto work = asio::make_work_guard(ioc);
  pool.start();
  // The leader asleep in epoll_wait, the other thread a follower.
  BOOST_TEST_REQUIRE(wait_until(
      [&] {
        const auto r = pool.roles();
        return r.leader == 1 && r.follower == 1 && r.processing == 0;
      },
      5s));
  constexpr int steps = 100;
  std::atomic<int> done{0};
  std::function<void()> step = [&] {
    lf_pool::promote_new_leader();
    if (++done < steps) asio::defer(ioc.get_executor(), step);
  };
  asio::post(ioc, step);
  // Stranded, the chain would stop for good; run, it ends at once (5 s: a loaded machine's once).
  BOOST_TEST(wait_until([&] { return done.load() == steps; }, 5s));
  work.reset();
  pool.stop();
  pool.join();
}

BOOST_AUTO_TEST_CASE(stop_wakes_every_thread) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 4, latency);
  auto work = asio::make_work_guard(ioc);  // the io_context never runs out of work
  pool.start();
  // Every thread asleep: one leader in epoll_wait, three followers.
  BOOST_TEST_REQUIRE(wait_until(
      [&] {
        const auto r = pool.roles();
        return r.leader == 1 && r.follower == 3 && r.processing == 0;
      },
      5s));
  const auto t0 = std::chrono::steady_clock::now();
  pool.stop();
  pool.join();
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 2s));
}

BOOST_AUTO_TEST_CASE(pool_leaves_when_the_io_context_runs_out_of_work) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 3, latency);
  std::atomic<int> ran{0};
  asio::steady_timer timer(ioc, 20ms);
  timer.async_wait([&](std::error_code) {
    lf_pool::promote_new_leader();
    ++ran;
  });
  pool.start();
  pool.join();  // returns by itself: no stop() needed
  BOOST_TEST(ran.load() == 1);
}

// Asked through the probe the gateway gives the supplier sessions, as they ask it.
BOOST_AUTO_TEST_CASE(idle_thread_waiting_tells_whether_a_posted_handler_would_start_at_once) {
  BOOST_TEST(!idle_thread_probe{}.any_waiting());  // no pool: never
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 2, latency);
  const idle_thread_probe probe(pool);
  BOOST_TEST(!probe.any_waiting());  // not a thread of the pool
  auto work = asio::make_work_guard(ioc);
  std::atomic<int> alone{-1};  // seen by the first handler, while the other thread leads
  std::atomic<int> both{-1};   // seen by the second, while the first one still runs
  std::atomic<bool> release{false};
  asio::post(ioc, [&] {
    lf_pool::promote_new_leader();
    alone = probe.any_waiting() ? 1 : 0;
    asio::post(ioc, [&] {
      lf_pool::promote_new_leader();
      both = probe.any_waiting() ? 1 : 0;
      release = true;
    });
    (void)wait_until([&] { return release.load(); }, 5s);
  });
  pool.start();
  BOOST_TEST(wait_until([&] { return release.load(); }, 5s));
  work.reset();
  pool.join();
  BOOST_TEST(alone.load() == 1);
  BOOST_TEST(both.load() == 0);
}

// Each thread of a pool has its own place in it, 0 .. size() - 1, the same for its whole life
// (what suppliers::frame_routers finds a thread's router by); no other thread has one.
BOOST_AUTO_TEST_CASE(every_pool_thread_has_a_place_of_its_own) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 3, latency);
  BOOST_TEST(pool.member_index() == lf_pool::not_a_member);
  auto work = asio::make_work_guard(ioc);
  std::mutex mutex;
  std::map<std::thread::id, std::set<unsigned>> seen;  // by thread: the places it was told
  std::atomic<unsigned> started{0};
  constexpr unsigned rounds = 5;
  for (unsigned round = 0; round < rounds; ++round) {
    started = 0;
    // Three handlers that wait for each other: one on each thread.
    for (int i = 0; i < 3; ++i) {
      asio::post(ioc, [&] {
        lf_pool::promote_new_leader();
        {
          std::lock_guard lock(mutex);
          seen[std::this_thread::get_id()].insert(pool.member_index());
        }
        ++started;
        (void)wait_until([&] { return started.load() >= 3; }, 5s);
      });
    }
    if (round == 0) pool.start();
    BOOST_TEST(wait_until([&] { return started.load() == 3; }, 5s));
    BOOST_TEST(wait_until([&] { return pool.roles().processing == 0; }, 5s));
  }
  work.reset();
  pool.join();
  std::set<unsigned> places;
  for (const auto& [thread, told] : seen) {
    BOOST_TEST(told.size() == 1u);  // the same every time
    places.insert(told.begin(), told.end());
  }
  BOOST_TEST(seen.size() == 3u);
  BOOST_TEST((places == std::set<unsigned>{0, 1, 2}));
}

// idle_poll: the same guarantees (one leader, every event handled, promotions) while threads
// poll before they sleep; and they do sleep: an idle pool burns no CPU past the poll.
namespace {

// 300 events on a pool of 3 threads that poll 2 ms before they sleep, some arriving while they
// poll; returns once all are handled, with at most one leader at any time.
void events_while_polling(asio::io_context& ioc, lf_pool& pool) {
  observer obs;
  constexpr unsigned events = 300;
  for (unsigned i = 0; i < events; ++i) {
    asio::post(ioc, [&] {
      obs.enter(pool);
      std::this_thread::sleep_for(50us);
      obs.leave();
    });
    if (i % 10 == 0) std::this_thread::sleep_for(300us);  // some arrive while threads poll
  }
  BOOST_TEST_REQUIRE(wait_until([&] { return obs.handled == events; }, 5s));
  BOOST_TEST(obs.max_leaders.load() <= 1u);
}

// The kernel's state letter of every thread of this process but the caller ('S': asleep in a
// futex or epoll_wait; 'R': running or runnable, which a polling thread always is).
std::map<pid_t, char> other_threads() {
  std::map<pid_t, char> out;
  const auto self = static_cast<pid_t>(::syscall(SYS_gettid));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const auto tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (tid == self) continue;
    std::ifstream in(task.path() / "stat");
    std::string line;
    std::getline(in, line);
    // "tid (name) S ...": the state follows the last ')' (a name may hold one).
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size()) out[tid] = line[close + 2];
  }
  return out;
}

// Three threads that poll 2 ms before they sleep, started, through events_while_polling, then
// left idle; stopped and joined when the case ends.
struct idle_polling_pool {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool{ioc, 3, latency, 2ms};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);

  idle_polling_pool() {
    pool.start();
    events_while_polling(ioc, pool);
  }
  ~idle_polling_pool() {
    work.reset();
    pool.stop();
    pool.join();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(polling_threads_keep_the_roles_and_sleep_once_idle, idle_polling_pool) {
  // Idle, every pool thread ends up asleep in the kernel, all three at once: one polling
  // without end is never seen asleep. A sanitizer may run a thread of its own (TSan's
  // background thread starts with the first pthread_create), so every other thread must sleep,
  // and there are at least the pool's three.
  std::string states;  // one letter a thread, at the last look
  BOOST_TEST(wait_until(
                 [&] {
                   states.clear();
                   for (const auto& [tid, state] : other_threads())
                     states += state;
                   return states.size() >= 3 && states.find_first_not_of('S') == std::string::npos;
                 },
                 5s),
             "an idle pool kept polling: thread states " << states);
}

// The same, measured (release only): the idle pool's CPU time over 300 ms.
BOOST_FIXTURE_TEST_CASE(an_idle_polling_pool_burns_no_cpu, idle_polling_pool,
                        *boost::unit_test::label("perf")) {
  std::this_thread::sleep_for(50ms);  // past every poll
  const auto cpu = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  const auto before = cpu();
  std::this_thread::sleep_for(300ms);
  // Three threads polling without end would use 900 ms here.
  BOOST_TEST((cpu() - before < 60ms), "an idle pool kept polling");
}
