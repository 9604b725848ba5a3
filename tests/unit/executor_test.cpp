// runtime::executor is the one place the Leader/Followers promotion happens: every kind of
// handler the gateway uses, built on it, must start its body on a thread that is no longer the
// leader. A handler on the bare io_context executor is the negative control: it still leads,
// so the check below can fail.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/executor.hpp"
#include "runtime/lf_pool.hpp"
#include "tests/support/wait_until.hpp"

using asio::ip::tcp;
using gatewayd::runtime::lf_pool;
using namespace std::chrono_literals;

namespace {

// What each handler kind saw when its body started.
struct kinds {
  std::mutex mutex;
  std::map<std::string, int> ran;
  std::map<std::string, int> still_leading;

  void enter(const std::string& kind) {
    const bool leads = lf_pool::this_thread_leads();
    std::lock_guard lock(mutex);
    ++ran[kind];
    if (leads) ++still_leading[kind];
  }
  int count(const std::string& kind) {
    std::lock_guard lock(mutex);
    return ran[kind];
  }
};

bool wait_until(const std::function<bool()>& done) {
  return gatewayd::test::wait_until(done, 5s);
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_handler_kind_promotes_before_its_body) {
  asio::io_context ioc;
  gatewayd::runtime::latency_histogram latency;
  lf_pool pool(ioc, 3, latency);
  const auto ex = gatewayd::runtime::make_executor(ioc);
  auto strand = gatewayd::runtime::make_strand(ex);
  auto work = asio::make_work_guard(ioc);
  kinds k;
  pool.start();

  // Posted and dispatched functions, from outside the pool and from inside a handler.
  asio::post(strand, [&] {
    k.enter("post");
    asio::post(gatewayd::runtime::make_strand(ex), [&] { k.enter("post from a handler"); });
  });
  asio::dispatch(gatewayd::runtime::make_strand(ex), [&] { k.enter("dispatch"); });
  asio::defer(gatewayd::runtime::make_strand(ex), [&] { k.enter("defer"); });

  // A timer.
  asio::steady_timer timer(strand, 5ms);
  timer.async_wait([&](std::error_code) { k.enter("timer"); });

  // Accept, connect, readiness wait, read, write (single and composed), as sessions and
  // consumers use them.
  tcp::acceptor acceptor(strand, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket served(gatewayd::runtime::make_strand(ex));
  tcp::socket client(gatewayd::runtime::make_strand(ex));
  std::vector<char> big(4 << 20, 'x');  // more than a socket buffer: several write steps
  std::vector<char> sink(big.size());
  // Boost.Test's assertions are not thread-safe: a handler only records; a failed accept or
  // connect never records its kind, and the wait below for every kind fails.
  acceptor.async_accept(served, [&](std::error_code ec) {
    if (ec) return k.enter("accept failed: " + ec.message());
    k.enter("accept");
    served.async_wait(tcp::socket::wait_read, [&](std::error_code) {
      k.enter("wait");
      asio::async_read(served, asio::buffer(sink),
                       [&](std::error_code, std::size_t) { k.enter("composed read"); });
    });
  });
  client.async_connect(acceptor.local_endpoint(), [&](std::error_code ec) {
    if (ec) return k.enter("connect failed: " + ec.message());
    k.enter("connect");
    client.async_write_some(asio::buffer(big.data(), 1), [&](std::error_code, std::size_t) {
      k.enter("write_some");
      asio::async_write(client, asio::buffer(big.data() + 1, big.size() - 1),
                        [&](std::error_code, std::size_t) { k.enter("composed write"); });
    });
  });

  // A signal, as the gateway's control strand receives SIGHUP/SIGTERM.
  asio::signal_set signals(strand, SIGUSR1);
  signals.async_wait([&](std::error_code, int) { k.enter("signal"); });
  std::this_thread::sleep_for(20ms);
  std::raise(SIGUSR1);

  const std::vector<std::string> wrapped = {"post",          "post from a handler",
                                            "dispatch",      "defer",
                                            "timer",         "accept",
                                            "connect",       "wait",
                                            "write_some",    "composed write",
                                            "composed read", "signal"};
  BOOST_TEST_REQUIRE(wait_until([&] {
    for (const auto& kind : wrapped)
      if (k.count(kind) == 0) return false;
    return true;
  }));
  for (const auto& kind : wrapped) {
    BOOST_TEST_INFO("handler kind: " << kind);
    BOOST_TEST(k.still_leading[kind] == 0);
  }

  // The negative control, posted once the pool is idle again (one leader waiting, nobody
  // processing): the bare executor bypasses the hook, so the leader runs it unpromoted.
  BOOST_TEST_REQUIRE(wait_until([&] {
    const auto r = pool.roles();
    return r.leader == 1 && r.processing == 0;
  }));
  asio::post(ioc.get_executor(), [&] { k.enter("bare io_context (control)"); });
  BOOST_TEST_REQUIRE(wait_until([&] { return k.count("bare io_context (control)") > 0; }));
  // The control ran as the leader (nothing promoted for it), so the check is able to fail.
  BOOST_TEST(k.still_leading["bare io_context (control)"] == 1);

  work.reset();
  pool.stop();
  pool.join();
}
