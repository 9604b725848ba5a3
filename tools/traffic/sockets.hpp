// Blocking TCP sockets for the traffic tools and test peers: literal endpoints, errors as
// std::error_code, and writes that notice a stop request while the peer does not read.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "net/endpoint.hpp"

namespace gatewayd::traffic {

// A connected socket (TCP_NODELAY; a blocked write wakes every 200 ms to look at its stop
// flag), or -1 with `ec` set.
int dial(const net::endpoint& to, std::error_code& ec);
// A listening socket (SO_REUSEADDR; port 0 = any free port), or -1 with `ec` set.
int listen_on(const net::endpoint& at, std::error_code& ec, int backlog = 4096);
// The port a socket is bound to.
std::uint16_t local_port(int fd) noexcept;

// 127.0.0.1:port, for tests and the soak.
net::endpoint loopback(std::uint16_t port);

// Writes all of `bytes`. False with `ec` set when the connection failed, or with
// std::errc::operation_canceled once `stop` is set while the write waits. `written`, when
// given, is set to how many bytes went out (all of them on success, a prefix on failure).
bool send_all(int fd, std::string_view bytes, const std::atomic<bool>& stop, std::error_code& ec,
              std::size_t* written = nullptr);

}  // namespace gatewayd::traffic
