#include "tests/support/http_get.hpp"

#include <array>
#include <asio.hpp>
#include <cstdlib>
#include <functional>

namespace gatewayd::test {

http_response http_get(unsigned short port, const std::string& target,
                       std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  std::string request = "GET ";
  request += target;
  request += " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  std::string reply;
  std::array<char, 16384> buf{};
  // Async on a private io_context so that run_for() bounds the whole exchange.
  std::function<void(std::error_code, std::size_t)> on_read = [&](std::error_code ec,
                                                                  std::size_t n) {
    reply.append(buf.data(), n);
    if (!ec) socket.async_read_some(asio::buffer(buf), on_read);
  };
  socket.async_connect({asio::ip::address_v4::loopback(), port}, [&](std::error_code ec) {
    if (ec) return;
    asio::async_write(socket, asio::buffer(request), [&](std::error_code wec, std::size_t) {
      if (!wec) socket.async_read_some(asio::buffer(buf), on_read);
    });
  });
  ioc.run_for(timeout);
  http_response r;
  if (!ioc.stopped()) return r;  // timed out
  const auto line_end = reply.find("\r\n");
  const auto head_end = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/", 0) != 0 || line_end == std::string::npos ||
      head_end == std::string::npos)
    return r;
  const auto sp = reply.find(' ');
  r.status = std::atoi(reply.c_str() + sp + 1);
  r.body = reply.substr(head_end + 4);
  return r;
}

}  // namespace gatewayd::test
