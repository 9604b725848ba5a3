// The configuration watcher and the reload race: an edit that lands after a reload has read
// the files and before it re-arms the watches must still be applied. The "reload" here is the
// test's own callback, so the edit lands exactly in that window, every run.
#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>

#include "gateway/config_watcher.hpp"
#include "tests/support/daemon_process.hpp"
#include "tests/support/stderr_lines.hpp"
#include "tests/support/test_peers.hpp"

using gatewayd::gateway::config_watcher;
using gatewayd::test::eventually;
using gatewayd::test::stderr_lines;
using gatewayd::test::temp_dir;
using namespace std::chrono_literals;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs the watcher's handlers on one thread of our own, as the gateway's pool would.
struct loop {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  gatewayd::runtime::executor executor = gatewayd::runtime::make_executor(ioc);
  std::thread thread;
  void start() {
    thread = std::thread([this] { ioc.run(); });
  }
  // Every handler posted to the watcher's strand before this call has run (not those they
  // post in turn). One hop through the io_context is not enough: a strand runs in turns, and
  // a handler posted while a turn is queued or running waits for the next turn, which asio
  // posts only when the current one ends. That end comes before our first hop runs (one
  // thread), so the second hop, posted by the first, runs after the next turn. With one hop,
  // the constructor's watch() ran after the test's first edit 8 times in 20.
  bool settle() {
    std::promise<void> done;
    auto ran = done.get_future();
    asio::post(ioc, [&] { asio::post(ioc, [&] { done.set_value(); }); });
    return ran.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  }
  // Before the watcher goes: no handler of it may run after.
  void finish() {
    work.reset();
    ioc.stop();
    if (thread.joinable()) thread.join();
  }
  ~loop() { finish(); }
};

// What each reload read, in order.
struct reloads {
  std::mutex mutex;
  std::vector<std::string> seen;
  void add(std::string text) {
    std::lock_guard lock(mutex);
    seen.push_back(std::move(text));
  }
  std::size_t count() {
    std::lock_guard lock(mutex);
    return seen.size();
  }
  std::vector<std::string> all() {
    std::lock_guard lock(mutex);
    return seen;
  }
  std::string last() {
    std::lock_guard lock(mutex);
    return seen.empty() ? std::string() : seen.back();
  }
};

}  // namespace

// What the watcher logs when arming finds a file that may differ from what was read, and
// schedules a reload for it: the one way a re-arm causes a reload.
constexpr std::string_view loading_again = "loading it again";

// One watched routes file whose reload, like the gateway's, reads it and then re-arms;
// `during_reload` runs between the two.
struct watched_routes {
  temp_dir dir;
  std::filesystem::path file = dir.write("routes.toml", "v1");
  loop l;
  reloads r;
  std::atomic<std::size_t> rearmed{0};  // reloads whose re-arm has been asked for
  std::function<void()> during_reload = [] {};
  config_watcher w{l.executor,
                   [this] {
                     r.add(read_file(file));
                     during_reload();
                     w.watch({file});
                     ++rearmed;
                   },
                   50ms};

  watched_routes() {
    w.reading(gatewayd::gateway::stamp_files({file}));
    w.watch({file});
    l.start();
    BOOST_TEST_REQUIRE(l.settle());  // armed
  }
  ~watched_routes() { l.finish(); }
};

BOOST_AUTO_TEST_CASE(an_edit_between_the_read_and_the_rearm_is_applied) {
  watched_routes t;
  // The first time only, an operator's save lands after the read and before the re-arm.
  t.during_reload = [&] {
    if (t.r.count() == 1) t.dir.write("routes.toml", "v3");
  };
  t.dir.write("routes.toml", "v2");
  BOOST_TEST_REQUIRE(eventually([&] { return t.r.count() >= 1; }, 5s));
  BOOST_TEST(eventually([&] { return t.r.last() == "v3"; }, 3s),
             "reloads: " << t.r.count() << ", last read " << t.r.last());
}

// The re-arm after a reload finds the file as the reload read it: it schedules nothing (no
// "loading it again"), and the next reload is the next edit's.
BOOST_AUTO_TEST_CASE(a_quiet_rearm_causes_no_reload) {
  stderr_lines log;
  watched_routes t;
  t.dir.write("routes.toml", "v2");
  BOOST_TEST_REQUIRE(eventually([&] { return t.rearmed.load() >= 1; }, 5s));
  BOOST_TEST_REQUIRE(t.l.settle());  // the re-arm has run
  BOOST_TEST(log.count(loading_again) == 0u, log.text());
  t.dir.write("routes.toml", "v3");  // the marker: its reload follows anything scheduled before
  BOOST_TEST_REQUIRE(eventually([&] { return t.r.last() == "v3"; }, 5s));
  BOOST_TEST((t.r.all() == std::vector<std::string>{"v2", "v3"}));
}

// A reload the watcher did not start (SIGHUP) that finds the routes file in a directory not
// watched yet: an edit after its read raises no event at all, only the stamps can tell.
BOOST_AUTO_TEST_CASE(an_edit_before_a_new_directory_is_watched_is_caught_by_the_stamps) {
  temp_dir dir;
  std::filesystem::create_directory(dir.path() / "new");
  const auto config = dir.write("gatewayd.toml", "c1");
  const auto routes = dir.write("new/routes.toml", "r1");
  loop l;
  reloads r;
  config_watcher w(
      l.executor, [&] { r.add(read_file(routes)); }, 50ms);
  w.watch({config});
  l.start();

  w.reading(gatewayd::gateway::stamp_files({config, routes}));
  const std::string read = read_file(routes);
  dir.write("new/routes.toml", "r2");  // lands after the read, before the re-arm
  w.watch({config, routes});
  BOOST_TEST(eventually([&] { return r.last() == "r2"; }, 3s), "reloads: " << r.count());

  // Without an edit in the window, the same sequence schedules no reload; the marker edit's
  // reload is the next one.
  stderr_lines log;
  const auto before = r.count();
  w.reading(gatewayd::gateway::stamp_files({config, routes}));
  w.watch({config, routes});
  BOOST_TEST_REQUIRE(l.settle());
  BOOST_TEST(log.count(loading_again) == 0u, log.text());
  dir.write("new/routes.toml", "r3");
  BOOST_TEST_REQUIRE(eventually([&] { return r.last() == "r3"; }, 3s));
  BOOST_TEST(r.count() == before + 1);
  l.finish();
}

// A file nobody stamped before reading it may have changed unseen: it is loaded again.
BOOST_AUTO_TEST_CASE(a_file_read_without_a_stamp_is_loaded_again) {
  temp_dir dir;
  const auto config = dir.write("gatewayd.toml", "c1");
  loop l;
  reloads r;
  config_watcher w(
      l.executor, [&] { r.add(read_file(config)); }, 50ms);
  stderr_lines log;
  l.start();
  w.watch({config});
  BOOST_TEST(eventually([&] { return r.count() == 1; }, 3s));
  BOOST_TEST(log.count("loaded unstamped") == 1u, log.text());
  // And then it is stamped: armed again (as the next reload would), it is not loaded again.
  w.watch({config});
  BOOST_TEST_REQUIRE(l.settle());
  BOOST_TEST(log.count("loaded unstamped") == 1u, log.text());
  BOOST_TEST(log.count(loading_again) == 1u, log.text());
  BOOST_TEST(r.count() == 1u);
  l.finish();
}
