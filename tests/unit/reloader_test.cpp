// The gateway's reloader against real files in a temporary directory, the real loader, a real
// consumer set whose consumers dial loopback peers and a real supplier listener on 127.0.0.1:
// a good edit applies whole, a bad one keeps everything running, live settings apply and
// restart-only ones stay, a change on disk reloads, SIGHUPs fold, and a stop ends reloading.
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "config/service_config.hpp"
#include "gateway/reloader.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;
namespace gw = gatewayd::gateway;
namespace fs = std::filesystem;

namespace {

struct temp_files {
  fs::path dir;
  temp_files() {
    std::string pattern = (fs::temp_directory_path() / "reloader_test.XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
  }
  ~temp_files() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // Written beside and renamed over, as editors save: the watcher sees one change, whole.
  fs::path write(const std::string& name, const std::string& text) const {
    const auto tmp = dir / (name + ".new");
    std::ofstream(tmp) << text;
    fs::rename(tmp, dir / name);
    return dir / name;
  }
};

std::string routes_text(const std::vector<std::pair<std::string, gatewayd::net::endpoint>>& cs) {
  std::string text;
  for (const auto& [name, at] : cs) {
    text += "[consumers." + name + "]\nendpoint = \"" + at.host + ":" + std::to_string(at.port) +
            "\"\n";
  }
  for (const auto& [name, at] : cs)
    text += "[[routes]]\nmatch = \"" + name + ".>\"\nto = [\"" + name + "\"]\n";
  return text;
}

std::string service_text(const std::string& extra = "", int threads = 2) {
  return "[gateway]\nsupplier_listen = \"127.0.0.1:0\"\nthreads = " + std::to_string(threads) +
         "\nroutes_file = \"routes.toml\"\nreconnect_initial_ms = 20\nreconnect_max_ms = 200\n" +
         extra;
}

std::vector<std::string> names(const gatewayd::suppliers::route_snapshot& s) {
  std::vector<std::string> out;
  for (const auto& c : s.consumers)
    out.push_back(c->name());
  return out;
}

// The gateway's parts a reload touches, as the gateway builds them from files start-up loaded,
// on an io_context run by two threads.
struct reload_fixture : io_fixture {
  temp_files files;
  peer pa;
  gatewayd::config::full_config loaded = load(routes_text({{"a", pa.address()}}));
  gatewayd::runtime::executor ex = gatewayd::runtime::make_executor(ioc);
  gatewayd::runtime::strand control = gatewayd::runtime::make_strand(ex);
  gw::consumer_set set{ex, control, loaded.service,
                       std::make_shared<gatewayd::routing::publish_drop_counters>()};
  gatewayd::suppliers::supplier_stats stats;
  gatewayd::runtime::byte_budget partial{1 << 20};
  gw::supplier_listener listener{ex, loaded.service, {set.routes(), stats, partial, set.readers()}};
  gw::systemd_notify notify{ex};
  gw::reloader reloader{
      ex, control, {loaded.service, set, listener, notify}, loaded.routing.consumers};

  reload_fixture() {
    on_control([&] {
      set.apply(loaded.routing, loaded.routes_sha256,
                gatewayd::routing::routing_table::build(loaded.routing.rules()));
    });
    listener.start();
  }
  ~reload_fixture() {
    reloader.stop();
    listener.stop();
    std::promise<std::uint64_t> left;
    on_control([&] { set.drain(1s, [&](std::uint64_t n) { left.set_value(n); }); });
    BOOST_TEST((left.get_future().wait_for(5s) == std::future_status::ready));
    on_control([] {});
    // The watcher's stop and its aborted wait run on its own strand and name the watcher: the
    // threads finish them before the members go (the daemon joins its pool first, likewise).
    work.reset();
    BOOST_TEST(wait_until([&] { return finished.load() == 2; }, 3s));
  }

  gatewayd::config::full_config load(const std::string& routes, const std::string& extra = "") {
    files.write("routes.toml", routes);
    const auto config = files.write("gatewayd.toml", service_text(extra));
    auto r = gatewayd::config::load_full_config(config);
    BOOST_TEST_REQUIRE(r.errors.empty(), (r.errors.empty() ? "" : r.errors.front().to_string()));
    return std::move(*r.config);
  }

  // Runs `f` on the control strand and waits for it: what was posted there before is done.
  template <class F>
  void on_control(F f) {
    run_on(control, std::move(f));
  }
  std::uint64_t succeeded() const { return reloader.stats().succeeded.load(); }
  std::uint64_t failed() const { return reloader.stats().failed.load(); }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_good_edit_applies_whole_and_a_bad_one_keeps_the_running_table,
                        reload_fixture) {
  BOOST_REQUIRE(pa.accept(5s));
  peer pb;
  files.write("routes.toml", routes_text({{"a", pa.address()}, {"b", pb.address()}}));
  reloader.request("test");
  on_control([] {});
  BOOST_TEST(succeeded() == 1u);
  BOOST_TEST(reloader.stats().last_successful.load());
  const auto good = set.routes().load();
  BOOST_TEST(names(*good) == (std::vector<std::string>{"a", "b"}));
  BOOST_TEST(pb.accept(5s).has_value());

  // A routes file that does not parse, then one that routes to a consumer it does not define:
  // both fail, and the table the good edit published stays.
  files.write("routes.toml", "[[routes]\nmatch = \"x\"\n");
  reloader.request("test");
  files.write("routes.toml", "[[routes]]\nmatch = \"x.>\"\nto = [\"nobody\"]\n");
  reloader.request("test");
  on_control([] {});
  BOOST_TEST(failed() == 2u);
  BOOST_TEST(succeeded() == 1u);
  BOOST_TEST(!reloader.stats().last_successful.load());
  BOOST_TEST(set.routes().load() == good);
  BOOST_TEST(set.size() == 2u);
}

BOOST_FIXTURE_TEST_CASE(live_settings_apply_and_restart_only_ones_keep_their_running_value,
                        reload_fixture) {
  // A supplier connected from 127.0.0.1, which the new allow list no longer admits.
  asio::io_context io;
  tcp::socket supplier(io);
  supplier.connect(listener.endpoint());
  BOOST_REQUIRE(wait_until([&] { return listener.sessions().size() == 1; }, 5s));

  files.write("gatewayd.toml", service_text("allow = [\"127.0.0.2/32\"]\n", 3));
  reloader.request("test");
  on_control([] {});
  BOOST_TEST(succeeded() == 1u);
  BOOST_TEST(loaded.service.threads == 2u);       // restart-only: kept
  BOOST_TEST(loaded.service.allow.size() == 1u);  // live: applied
  // And applied to the open session: it is closed (waited for first, so that the read below
  // cannot block).
  BOOST_TEST_REQUIRE(wait_until([&] { return listener.sessions().size() == 0; }, 5s));
  char byte;
  std::error_code ec;
  supplier.read_some(asio::buffer(&byte, 1), ec);
  BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset));
}

BOOST_FIXTURE_TEST_CASE(a_change_on_disk_reloads, reload_fixture) {
  reloader.watch();
  peer pb;
  files.write("routes.toml", routes_text({{"a", pa.address()}, {"b", pb.address()}}));
  BOOST_TEST(wait_until([&] { return succeeded() == 1; }, 10s));
  BOOST_TEST(names(*set.routes().load()) == (std::vector<std::string>{"a", "b"}));
}

// A SIGHUP storm while a reload runs is served by the one reload queued after it.
BOOST_FIXTURE_TEST_CASE(sighups_that_find_a_reload_waiting_fold_into_it, reload_fixture) {
  std::promise<void> release;
  std::promise<void> held;
  asio::post(control, [&] {
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  for (int i = 0; i < 5; ++i)
    reloader.on_sighup();
  release.set_value();
  on_control([] {});
  BOOST_TEST(succeeded() == 1u);
  reloader.on_sighup();  // none waits now: this one is served
  on_control([] {});
  BOOST_TEST(succeeded() == 2u);
}

BOOST_FIXTURE_TEST_CASE(after_stop_no_reload_starts, reload_fixture) {
  std::promise<void> release;
  std::promise<void> held;
  asio::post(control, [&] {
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  reloader.request("queued before the stop");  // runs after it: the stop wins
  reloader.stop();
  reloader.on_sighup();
  reloader.request("after the stop");
  release.set_value();
  on_control([] {});
  BOOST_TEST(succeeded() == 0u);
  BOOST_TEST(failed() == 0u);
}
