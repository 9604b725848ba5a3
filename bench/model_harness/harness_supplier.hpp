// The supplier side of the model harness: the listener, and one session per connection that
// waits for readability, reads into the product's frame stream, parses every whole frame,
// routes it by the product's routing table and hands each consumer its batch.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness_consumer.hpp"
#include "net/endpoint.hpp"
#include "protocol/frame_stream.hpp"
#include "routing/routing_table.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::harness {

class handoff_queue;

// What every session shares; built before the threads start, read-only after (but the counters).
struct harness_context {
  std::shared_ptr<const routing::routing_table> table;
  std::vector<std::shared_ptr<harness_consumer>> consumers;  // by routing index
  std::uint32_t max_payload = protocol::default_max_payload;
  handoff_queue* handoff = nullptr;  // Half-Sync/Half-Async: where the I/O thread sends reads
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> frames_received{0};
  std::atomic<std::uint64_t> unroutable{0};
  std::atomic<std::uint64_t> protocol_errors{0};
};

class harness_session : public std::enable_shared_from_this<harness_session>, public flow_listener {
 public:
  // Reads after the socket reported readable, never blocking; at most this much per pass.
  static constexpr std::size_t read_budget = 1024 * 1024;

  // `socket` is on a strand of its own: the session's handlers never run at once.
  harness_session(asio::ip::tcp::socket socket, harness_context& ctx);
  harness_session(const harness_session&) = delete;
  harness_session& operator=(const harness_session&) = delete;

  void start();
  // Half-Sync/Half-Async, on a worker: parses, routes and enqueues what the I/O thread read.
  void route_handed_off();

  // flow_listener, any thread. The pass being processed holds the session as well as every
  // consumer that paused it: it waits for readability again only when nobody holds it.
  void hold() noexcept override;
  void release() override;

 private:
  void do_wait();
  void on_readable(std::error_code ec);
  // Leader/Followers and asio-threads: this thread reads until the socket is drained or the
  // budget spent, routing after each read, then hands each consumer one batch.
  void read_and_route();
  // Half-Sync/Half-Async, on the I/O thread: one read, then the chunk goes to a worker.
  void read_for_handoff();
  // Parses what the stream holds into the per-consumer batches; false on a protocol error.
  bool route_frames();
  void flush();
  // The pass's own hold, dropped on the strand.
  void end_pass();
  void continue_reading();
  void close();

  asio::ip::tcp::socket socket_;
  harness_context& ctx_;
  protocol::frame_stream stream_;
  routing::lookup_scratch scratch_;
  std::vector<std::vector<frame_slice>> batches_;  // by consumer index, reused
  std::vector<routing::consumer_index> touched_;   // consumers with a batch this pass
  std::atomic<std::uint32_t> holds_{0};
  // The peer left or broke the protocol: what it sent before is routed, then it is closed.
  // Written by the pass, read once nobody holds the session.
  bool closing_ = false;
};

class supplier_listener : public std::enable_shared_from_this<supplier_listener> {
 public:
  // Binds and listens (throws).
  supplier_listener(const runtime::executor& ex, const net::endpoint& at, harness_context& ctx);
  asio::ip::tcp::endpoint local_endpoint() const;
  void start();

 private:
  void do_accept();

  runtime::executor executor_;
  asio::ip::tcp::acceptor acceptor_;
  harness_context& ctx_;
};

}  // namespace gatewayd::harness
