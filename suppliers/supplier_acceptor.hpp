// Accepts supplier connections on supplier_listen, enforces the connection cap and the
// source allow-list, and starts a session per connection on its own strand.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>

#include "net/endpoint.hpp"
#include "runtime/executor.hpp"
#include "suppliers/supplier_session.hpp"

namespace gatewayd::suppliers {

class supplier_acceptor : public std::enable_shared_from_this<supplier_acceptor> {
 public:
  // Decides whether a source address may connect (the `allow` list); empty = everyone.
  using admission = std::function<bool(const asio::ip::address&)>;

  // Binds and listens at once: a bind error throws here, at start-up, with the address in it.
  supplier_acceptor(const runtime::executor& ex, const net::endpoint& listen, session_context& ctx,
                    std::size_t max_connections, admission allow = {});

  void start();
  // Stops accepting; live sessions are the registry's business.
  void stop();
  asio::ip::tcp::endpoint local_endpoint() const;

 private:
  void do_accept();
  void on_accept(std::error_code ec, asio::ip::tcp::socket socket);
  void refuse(asio::ip::tcp::socket& socket, close_reason why);

  runtime::executor executor_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  session_context& ctx_;
  std::size_t max_connections_;
  admission allow_;
  bool stopped_ = false;
};

}  // namespace gatewayd::suppliers
