// Accepts supplier connections on supplier_listen, reads the PROXY header of those a trusted
// balancer forwards, enforces the connection cap (reclaiming paused sessions at it), the cap on
// handshakes (evicting the oldest at it) and the source allow-list on the real supplier, and
// starts a session per connection on its own strand.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "net/cidr_block.hpp"
#include "net/endpoint.hpp"
#include "runtime/executor.hpp"
#include "suppliers/proxy_handshake.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

class supplier_acceptor : public std::enable_shared_from_this<supplier_acceptor> {
 public:
  // Decides whether a source address may connect (the `allow` list); empty = everyone.
  using admission = std::function<bool(const asio::ip::address&)>;
  // An admission by CIDR blocks (an empty list admits everyone).
  static admission from_blocks(std::vector<net::cidr_block> blocks);

  // PROXY protocol v2: connections from `from` (the balancers) must start with the header, read
  // within `timeout`; it names the supplier the allow-list, the logs and the session see.
  // Empty `from` = off: every connection is a plain supplier.
  struct proxy_options {
    admission from;
    std::chrono::milliseconds timeout{5000};
  };

  // What the kernel may hold of what the gateway sends a supplier (SO_SNDBUF; Linux doubles
  // it for its bookkeeping): only TLS handshake messages, KeyUpdate answers and confirm replies
  // (at most confirm_replies::buffer_bytes unread), so a supplier that never reads pins this
  // much, not the autotuned megabytes, before it is closed as slow.
  static constexpr int send_buffer_bytes = 32 * 1024;

  // Binds and listens at once: a bind error throws here, at start-up, with the address in it.
  // `max_handshakes`: connections still in their TLS handshake or PROXY header, which hold no
  // place under `max_connections` (max_handshaking_connections).
  supplier_acceptor(const runtime::executor& ex, const net::endpoint& listen, session_context& ctx,
                    std::size_t max_connections, admission allow, proxy_options proxy,
                    std::size_t max_handshakes = 256);

  void start();
  // Stops accepting; live sessions are the registry's business.
  void stop();
  asio::ip::tcp::endpoint local_endpoint() const;

 private:
  void do_accept();
  void on_accept(std::error_code ec, asio::ip::tcp::socket socket);
  void read_proxy_header(asio::ip::tcp::socket socket, const asio::ip::tcp::endpoint& balancer);
  void on_proxy_header(asio::ip::tcp::socket socket, asio::ip::tcp::endpoint balancer,
                       proxy_handshake::outcome o);
  // Checks `peer` (the supplier, behind a balancer or not: then `proxied` is set) against the
  // allow-list and (plaintext) the cap, and starts its session.
  void admit(asio::ip::tcp::socket socket, const asio::ip::tcp::endpoint& peer,
             std::optional<asio::ip::tcp::endpoint> proxied);
  void refuse(asio::ip::tcp::socket& socket, close_reason why, const std::string& who);

  runtime::executor executor_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  session_context& ctx_;
  admission allow_;
  proxy_options proxy_;
  std::vector<std::weak_ptr<proxy_handshake>> handshakes_;  // to cancel them on stop()
  bool stopped_ = false;
};

}  // namespace gatewayd::suppliers
