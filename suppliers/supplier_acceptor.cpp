#include "suppliers/supplier_acceptor.hpp"

#include <stdexcept>

#include "runtime/log.hpp"
#include "suppliers/session_registry.hpp"

namespace gatewayd::suppliers {

supplier_acceptor::supplier_acceptor(const runtime::executor& ex, const net::endpoint& listen,
                                     session_context& ctx, std::size_t max_connections,
                                     admission allow)
    : executor_(ex),
      acceptor_(runtime::make_strand(ex)),
      retry_timer_(acceptor_.get_executor()),
      ctx_(ctx),
      max_connections_(max_connections),
      allow_(std::move(allow)) {
  std::error_code ec;
  const asio::ip::tcp::endpoint ep(asio::ip::make_address(listen.host, ec), listen.port);
  if (ec) throw std::runtime_error("supplier_listen " + listen.to_string() + ": " + ec.message());
  // Fully built or not at all: no half-open listener after a bind error.
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("cannot listen for suppliers on " + listen.to_string() + ": " +
                             ec.message());
  }
}

asio::ip::tcp::endpoint supplier_acceptor::local_endpoint() const {
  std::error_code ec;
  return acceptor_.local_endpoint(ec);
}

void supplier_acceptor::start() {
  asio::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void supplier_acceptor::stop() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
    self->stopped_ = true;
    self->retry_timer_.cancel();
    std::error_code ignored;
    self->acceptor_.close(ignored);
  });
}

void supplier_acceptor::do_accept() {
  // Each session gets its own strand: its socket and idle timer are never touched by two
  // threads at once, with no mutex around them.
  acceptor_.async_accept(runtime::make_strand(executor_),
                         [self = shared_from_this()](std::error_code ec, asio::ip::tcp::socket s) {
                           self->on_accept(ec, std::move(s));
                         });
}

void supplier_acceptor::on_accept(std::error_code ec, asio::ip::tcp::socket socket) {
  if (stopped_ || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or memory: keep the listener, try again shortly, never stop accepting.
    GW_LOG(warning) << "accepting a supplier failed: " << ec.message() << "; retrying in 100 ms";
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([self = shared_from_this()](std::error_code e) {
      if (!e && !self->stopped_) self->do_accept();
    });
    return;
  }
  std::error_code peer_ec;
  const auto peer = socket.remote_endpoint(peer_ec);
  if (peer_ec) {
    do_accept();
    return;
  }
  if (allow_ && !allow_(peer.address())) {
    refuse(socket, close_reason::not_allowed);
  } else if (ctx_.registry.size() >= max_connections_) {
    refuse(socket, close_reason::connection_limit);
  } else {
    ctx_.stats.accepted.fetch_add(1, std::memory_order_relaxed);
    socket.set_option(asio::ip::tcp::no_delay(true), peer_ec);
    std::make_shared<supplier_session>(std::move(socket), ctx_)->start();
  }
  do_accept();
}

void supplier_acceptor::refuse(asio::ip::tcp::socket& socket, close_reason why) {
  ctx_.stats.closed[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  std::error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  // A flood of refusals must not flood the log.
  GW_LOG_LIMITED(warning, "refused supplier connections")
      << "refused supplier " << peer.address().to_string() << ":" << peer.port() << " ("
      << to_string(why) << ")";
  socket.close(ec);
}

}  // namespace gatewayd::suppliers
