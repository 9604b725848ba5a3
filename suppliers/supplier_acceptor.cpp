#include "suppliers/supplier_acceptor.hpp"

#include <stdexcept>

#include "runtime/log.hpp"
#include "suppliers/session_registry.hpp"

namespace gatewayd::suppliers {
namespace {

std::string text_of(const asio::ip::tcp::endpoint& ep) {
  const auto a = ep.address();
  return (a.is_v6() ? '[' + a.to_string() + ']' : a.to_string()) + ':' + std::to_string(ep.port());
}

}  // namespace

supplier_acceptor::admission supplier_acceptor::from_blocks(std::vector<net::cidr_block> blocks) {
  return [blocks = std::move(blocks)](const asio::ip::address& a) {
    if (a.is_v4()) return net::allowed_by(blocks, a.to_v4().to_bytes());
    return net::allowed_by(blocks, a.to_v6().to_bytes());
  };
}

supplier_acceptor::supplier_acceptor(const runtime::executor& ex, const net::endpoint& listen,
                                     session_context& ctx, std::size_t max_connections,
                                     admission allow, proxy_options proxy,
                                     std::size_t max_handshakes)
    : executor_(ex),
      acceptor_(runtime::make_strand(ex)),
      retry_timer_(acceptor_.get_executor()),
      ctx_(ctx),
      allow_(std::move(allow)),
      proxy_(std::move(proxy)) {
  ctx_.registry.limit(max_connections, max_handshakes, &ctx_.stats.handshaking);
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
    for (const auto& h : self->handshakes_)
      if (auto live = h.lock()) live->cancel();
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
  if (proxy_.from && proxy_.from(peer.address())) {
    read_proxy_header(std::move(socket), peer);
  } else {
    admit(std::move(socket), peer, std::nullopt);
  }
  do_accept();
}

// A balancer's connection: the supplier's address comes first, in the PROXY header. Until it
// arrives the connection holds no place under max_supplier_connections but a slot under
// max_handshaking_connections (the oldest gives its slot up to a new one at that cap), so a
// stalled balancer or a stranger cannot open unbounded connections nor keep a supplier out;
// stop() cancels it, so a pending header never keeps the daemon running.
void supplier_acceptor::read_proxy_header(asio::ip::tcp::socket socket,
                                          const asio::ip::tcp::endpoint& balancer) {
  std::erase_if(handshakes_, [](const auto& h) { return h.expired(); });
  auto handshake = std::make_shared<proxy_handshake>(std::move(socket), proxy_.timeout);
  const auto ticket = ctx_.registry.begin_handshake(
      handshake_source_of(balancer.address()), [weak = std::weak_ptr<proxy_handshake>(handshake)] {
        if (const auto h = weak.lock()) h->evict();
      });
  handshakes_.push_back(handshake);
  handshake->start([self = shared_from_this(), balancer, ticket](asio::ip::tcp::socket s,
                                                                 proxy_handshake::outcome o) {
    self->ctx_.registry.end_handshake(ticket);
    asio::post(self->acceptor_.get_executor(),
               [self, balancer, s = std::move(s), o = std::move(o)]() mutable {
                 self->on_proxy_header(std::move(s), balancer, std::move(o));
               });
  });
}

void supplier_acceptor::on_proxy_header(asio::ip::tcp::socket socket,
                                        asio::ip::tcp::endpoint balancer,
                                        proxy_handshake::outcome o) {
  std::error_code ignored;
  if (stopped_) return socket.close(ignored);
  if (o.evicted) {
    return refuse(socket, close_reason::handshake_evicted,
                  text_of(balancer) +
                      ": the oldest of max_handshaking_connections still "
                      "without its PROXY header");
  }
  if (!o.ok) {
    return refuse(socket, close_reason::proxy_header,
                  text_of(balancer) + ": " + o.error + " from the balancer");
  }
  // LOCAL (a health check) or no TCP address: the balancer's own address stands. (TLS: its
  // place under the cap is taken once its handshake is done.)
  admit(std::move(socket), o.supplier.value_or(balancer), o.supplier);
}

// At the cap a session waiting for a stalled backpressure consumer holds a place that a supplier
// of another consumer may need: the one waiting longest gives it up (as a web server reclaims
// idle keep-alive connections when it runs out), and only when none is paused so is the new
// connection refused. One stalled consumer cannot shut every other consumer's suppliers out.
// A TLS connection takes its place only once its handshake is done (the session asks the
// registry then): connections that never finish one keep nobody out.
void supplier_acceptor::admit(asio::ip::tcp::socket socket, const asio::ip::tcp::endpoint& peer,
                              std::optional<asio::ip::tcp::endpoint> proxied) {
  if (allow_ && !allow_(peer.address())) {
    return refuse(socket, close_reason::not_allowed, text_of(peer));
  }
  if (!ctx_.tls && !ctx_.registry.room_for_one()) {
    return refuse(socket, close_reason::connection_limit, text_of(peer));
  }
  ctx_.stats.accepted.fetch_add(1, std::memory_order_relaxed);
  std::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::send_buffer_size(send_buffer_bytes), ignored);
  std::make_shared<supplier_session>(std::move(socket), ctx_, proxied)->start();
}

void supplier_acceptor::refuse(asio::ip::tcp::socket& socket, close_reason why,
                               const std::string& who) {
  ctx_.stats.closed[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  // A flood of refusals must not flood the log.
  GW_LOG_LIMITED(warning, "refused supplier connections")
      << "refused supplier " << who << " (" << to_string(why) << ")";
  std::error_code ec;
  socket.close(ec);
}

}  // namespace gatewayd::suppliers
