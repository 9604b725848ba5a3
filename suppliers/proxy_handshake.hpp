// Reads the PROXY protocol v2 header a trusted balancer sends before a supplier's first byte:
// exactly the header's bytes (never one of the supplier's), within a deadline, on the
// connection's own strand; then hands the socket and the supplier's address back.
#pragma once

#include <array>
#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/proxy_header.hpp"

namespace gatewayd::suppliers {

class proxy_handshake : public std::enable_shared_from_this<proxy_handshake> {
 public:
  struct outcome {
    bool ok = false;
    // The supplier behind the balancer; empty when the header says LOCAL (a health check) or
    // names no TCP address: the connection's own address stands.
    std::optional<asio::ip::tcp::endpoint> supplier;
    std::string error;     // why it failed: the parser's reason, a timeout, the peer leaving
    bool evicted = false;  // a newer connection took its slot (max_handshaking_connections)
  };
  // Called once, on the socket's strand.
  using completion = std::function<void(asio::ip::tcp::socket, outcome)>;

  proxy_handshake(asio::ip::tcp::socket socket, std::chrono::milliseconds timeout);

  void start(completion done);
  // From any thread: ends it now (the listener closed); `done` still runs, with an error.
  void cancel() { end(false); }
  // From any thread: ends it now, as evicted (a newer connection takes its slot).
  void evict() { end(true); }

 private:
  void read_up_to(std::size_t total);
  void on_read(std::error_code ec, std::size_t n);
  void finish(outcome o);
  void end(bool evicted);

  asio::ip::tcp::socket socket_;
  asio::steady_timer deadline_;
  std::chrono::milliseconds timeout_;
  completion done_;
  std::array<std::uint8_t, net::proxy_v2_max_size> header_{};
  std::size_t have_ = 0;
  bool timed_out_ = false;
  bool evicted_ = false;
  bool finished_ = false;
};

}  // namespace gatewayd::suppliers
