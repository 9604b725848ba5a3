// The gateway's side of the supplier tests (supplier_session_test, supplier_acceptor_test):
// one consumer routed "t.>" and the context every session shares; and the supplier's end
// reading that the gateway closed it. The acceptor (the test's own listener, or the
// supplier_acceptor under test) is each test's.
#pragma once

#include <poll.h>

#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <chrono>
#include <memory>

#include "suppliers/session_registry.hpp"
#include "suppliers/supplier_session.hpp"
#include "tests/support/consumer_harness.hpp"
#include "tests/support/routing_rules.hpp"

namespace gatewayd::test {

namespace su = gatewayd::suppliers;

struct supplier_side {
  su::route_snapshot_holder routes;
  su::supplier_stats stats;
  su::session_registry registry;
  su::route_readers readers;
  su::frame_routers routers{readers};  // this test's io_context threads are not a pool's
  su::session_context ctx;

  explicit supplier_side(const std::shared_ptr<gc::consumer>& c,
                         std::chrono::milliseconds idle_timeout = 0ms)
      : ctx{routes, stats, registry, gs::default_max_payload, idle_timeout} {
    ctx.routers = &routers;
    auto snap = std::make_shared<su::route_snapshot>();
    snap->table =
        gatewayd::routing::routing_table::build(make_config({c->name()}, {{"t.>", {c->name()}}}));
    snap->consumers.push_back(c);
    routes.publish(std::move(snap));
  }
  // Every session gone before the context it points to (a failed check may leave early).
  ~supplier_side() {
    if (!wait_until([&] { return registry.size() == 0; }, 3s))
      BOOST_ERROR("a supplier session outlived its test");
  }
  supplier_side(const supplier_side&) = delete;
  supplier_side& operator=(const supplier_side&) = delete;

  std::uint64_t closed(su::close_reason r) const {
    return stats.closed[static_cast<std::size_t>(r)].load();
  }
  std::uint64_t partial_frames(su::partial_discard r) const {
    return stats.partial_frames_discarded[static_cast<std::size_t>(r)].load();
  }
  std::uint64_t partial_bytes(su::partial_discard r) const {
    return stats.partial_bytes_discarded[static_cast<std::size_t>(r)].load();
  }
};

// The gateway closed the supplier's connection `sock`: it reads end-of-file (or a reset)
// within `timeout`.
inline bool closed_by_gateway(tcp::socket& sock, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{sock.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char c[256];
    std::error_code ec;
    sock.read_some(asio::buffer(c), ec);
    if (ec) return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
}

}  // namespace gatewayd::test
