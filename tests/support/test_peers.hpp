// Real loopback peers for tests: a consumer endpoint that collects and verifies frames, and
// a blocking supplier that sends them.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gatewayd::test {

struct received_frame {
  std::string address;
  std::string payload;
  std::size_t connection = 0;  // which accepted connection (1-based) it arrived on
};

// Listens on 127.0.0.1 (port 0 = any), accepts the gateway's connections one after another,
// parses every byte as GWP/1 and records each whole frame. A partial or malformed frame is
// recorded as a corruption, which tests assert never happens.
class test_consumer {
 public:
  explicit test_consumer(unsigned short port = 0);
  // Listens on `host` instead (a namespace's veth address, for the network-fault tests).
  test_consumer(const std::string& host, unsigned short port);
  ~test_consumer();
  test_consumer(const test_consumer&) = delete;
  test_consumer& operator=(const test_consumer&) = delete;

  unsigned short port() const noexcept { return port_; }
  std::string endpoint() const { return host_ + ":" + std::to_string(port_); }

  // Stops reading (the gateway's writes then back up in the kernel) / starts again.
  void stall(bool on);
  // Acts as an `ack = true` consumer: after each read that completed frames, sends `ack N` on
  // that connection (N = its frames so far). A stall stops the acks with the reads.
  void acknowledge(bool on) { ack_ = on; }
  // Also sends its last `ack N` again every 100 ms while it has one (a consumer that acks on a
  // timer), so its packets reach the gateway while it receives nothing.
  void repeat_acks(bool on) { repeat_acks_ = on; }
  // Closes the current connection (the gateway should redial).
  void drop_connection();

  std::vector<received_frame> frames() const;
  std::size_t count() const;
  std::size_t connections() const noexcept { return connections_.load(); }
  std::size_t corruptions() const noexcept { return corruptions_.load(); }
  // Frames cut by a closed connection (a partial frame at the end of a stream).
  std::size_t partial_at_close() const noexcept { return partial_at_close_.load(); }
  // Connections this side has finished with (end of stream, an error, drop_connection()):
  // everything the gateway sent on them has been read.
  std::size_t closes() const noexcept { return closes_.load(); }
  // Bytes read and not yet a whole frame (a frame on its way, or a stream that stopped mid-frame),
  // and all bytes read: what a failed count says beside the frames.
  std::size_t unparsed_bytes() const noexcept { return unparsed_.load(); }
  std::size_t bytes_read() const noexcept { return bytes_read_.load(); }
  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const;
  // Frames whose payload is `payload`: the markers a test sends after the rest, so that once
  // they are in, nothing sent before them on their connections is still on its way.
  std::size_t count_payload(const std::string& payload) const;
  bool wait_for_payload(const std::string& payload, std::size_t n,
                        std::chrono::milliseconds timeout) const;
  bool wait_for_connections(std::size_t n, std::chrono::milliseconds timeout) const;

 private:
  void run();

  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  std::string host_;
  unsigned short port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stalled_{false};
  std::atomic<bool> ack_{false};
  std::atomic<bool> repeat_acks_{false};
  std::atomic<bool> drop_{false};
  std::atomic<std::size_t> connections_{0};
  std::atomic<std::size_t> corruptions_{0};
  std::atomic<std::size_t> partial_at_close_{0};
  std::atomic<std::size_t> closes_{0};
  std::atomic<std::size_t> unparsed_{0};
  std::atomic<std::size_t> bytes_read_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<received_frame> frames_;
};

// A blocking TCP supplier. `source`: the loopback address it connects from (127.0.0.2 is a
// real, distinct source once bound before connect); empty = whatever the kernel picks.
class test_supplier {
 public:
  explicit test_supplier(unsigned short port, const std::string& source = "");
  void send(const std::string& bytes);
  // Sends `bytes` unless the gateway stops reading: false when they could not all be written
  // within `timeout` (what was written stays written).
  bool send_within(const std::string& bytes, std::chrono::milliseconds timeout);
  void send_frame(const std::string& address, const std::string& payload);
  // True once the gateway closed the connection (reads EOF or an error within `timeout`).
  bool closed_by_peer(std::chrono::milliseconds timeout);
  asio::ip::tcp::socket& socket() noexcept { return socket_; }

 private:
  asio::io_context ioc_;
  asio::ip::tcp::socket socket_;
};

// A 127.0.0.1 port nobody listens on right now (the kernel's choice, released again): for
// programs that cannot report the port they bound, and for a port that refuses connections.
unsigned short free_port();

// A 127.0.0.1 port that refuses connections for as long as this lives: bound, never listening,
// so no listener bound to port 0 meanwhile (the daemon's) and no dial's own source port can take
// it. A port found free and let go was once the daemon's metrics port a second later, and a
// consumer meant to be away "delivered" its spool to the HTTP server. release() lets it go, for
// the test to listen there itself.
class refused_port {
 public:
  refused_port();
  ~refused_port() { release(); }
  refused_port(const refused_port&) = delete;
  refused_port& operator=(const refused_port&) = delete;
  unsigned short number() const noexcept { return port_; }
  void release() noexcept;

 private:
  int fd_ = -1;
  unsigned short port_ = 0;
};

// A whole file's bytes ("" when it cannot be read), and `s` with every `from` made `to`: how
// tests point the samples in etc/ at their own ports.
std::string read_text(const std::string& path);
void replace_all(std::string& s, const std::string& from, const std::string& to);

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace gatewayd::test
