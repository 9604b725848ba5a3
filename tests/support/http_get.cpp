#include "tests/support/http_get.hpp"

#include <array>
#include <asio.hpp>
#include <cstdlib>
#include <functional>

namespace gatewayd::test {

raw_exchange http_exchange(unsigned short port, const std::string& request,
                           const std::string& source, std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  asio::ip::tcp::socket socket(ioc);
  raw_exchange result;
  result.end = asio::error::timed_out;
  if (!source.empty()) {
    socket.open(asio::ip::tcp::v4());
    socket.bind({asio::ip::make_address_v4(source), 0});
  }
  std::array<char, 16384> buf{};
  // Async on a private io_context so that run_for() bounds the whole exchange.
  std::function<void(std::error_code, std::size_t)> on_read = [&](std::error_code ec,
                                                                  std::size_t n) {
    result.reply.append(buf.data(), n);
    if (ec) {
      result.end = ec;
      return;
    }
    socket.async_read_some(asio::buffer(buf), on_read);
  };
  socket.async_connect({asio::ip::address_v4::loopback(), port}, [&](std::error_code ec) {
    if (ec) {
      result.end = ec;
      return;
    }
    result.connected = true;
    if (request.empty()) return socket.async_read_some(asio::buffer(buf), on_read);
    asio::async_write(socket, asio::buffer(request), [&](std::error_code wec, std::size_t) {
      // A server that closes before it read everything may reset the connection: what it
      // answered is still read, up to the reset.
      (void)wec;
      socket.async_read_some(asio::buffer(buf), on_read);
    });
  });
  ioc.run_for(timeout);
  return result;
}

http_response http_get(unsigned short port, const std::string& target,
                       std::chrono::milliseconds timeout, const std::string& source) {
  std::string request = "GET ";
  request += target;
  request += " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  const auto exchange = http_exchange(port, request, source, timeout);
  http_response r;
  if (exchange.end == asio::error::timed_out) return r;
  const std::string& reply = exchange.reply;
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
