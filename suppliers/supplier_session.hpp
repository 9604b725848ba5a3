// One supplier connection: waits for readability, reads big chunks, decodes every whole GWP/1
// frame and routes it; the only thread touching the connection is the one its strand admits.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <memory>

#include "consumers/flow_control.hpp"
#include "suppliers/frame_stream.hpp"
#include "suppliers/route_snapshot.hpp"
#include "suppliers/session_handoff.hpp"
#include "suppliers/supplier_stats.hpp"

namespace gatewayd::suppliers {

class session_registry;

// What every session shares, owned by the gateway and outliving all sessions.
struct session_context {
  const route_snapshot_holder& routes;
  supplier_stats& stats;
  session_registry& registry;
  std::uint32_t max_payload;
  std::chrono::milliseconds idle_timeout;  // 0 = never
  // Half-Sync/Half-Async: where a read chunk goes to be parsed and routed by a worker.
  // Null (Leader/Followers, asio-threads): the thread that saw the event processes it.
  session_handoff* handoff = nullptr;
};

class supplier_session : public std::enable_shared_from_this<supplier_session>,
                         public consumers::flow_control_listener {
 public:
  // Bytes read per event before yielding to other connections (fairness under load).
  static constexpr std::size_t read_budget = 1024 * 1024;

  supplier_session(asio::ip::tcp::socket socket, session_context& ctx);
  ~supplier_session();

  void start();
  // Closes the connection from any thread (posted to the session's strand).
  void stop();
  // Stops reading but keeps the connection (graceful drain: no new frames come in).
  void pause_reading();
  void resume_reading() override;

  const std::string& peer() const noexcept { return peer_; }

  // Half-Sync/Half-Async, on a worker: parses and routes the chunk the I/O thread read, then
  // posts on_handoff_done() back to the session's strand.
  void process_handoff();

 private:
  void do_wait();
  void on_readable(std::error_code ec);
  void read_and_route();
  void read_for_handoff();
  void on_handoff_done();
  void fail_protocol(const frame_stream::stream_error& e);
  void close();
  void arm_idle_timer(std::chrono::steady_clock::duration after);
  void on_idle_timer(std::error_code ec);

  asio::ip::tcp::socket socket_;
  asio::steady_timer idle_timer_;
  session_context& ctx_;
  frame_stream stream_;
  std::string peer_;
  std::chrono::steady_clock::time_point last_progress_;
  bool waiting_ = false;  // an async_wait is pending
  bool paused_ = false;   // backpressure or drain: no new wait until resumed
  bool held_ = false;     // paused by the gateway itself (drain): resume only by it
  bool closed_ = false;
  // Half-Sync/Half-Async: a worker owns stream_ until on_handoff_done (strand-only flag); the
  // worker's results travel back with the completion it posts.
  bool handed_off_ = false;
  std::uint64_t handoff_frames_ = 0;
  bool handoff_pause_ = false;
  bool resumed_while_handed_off_ = false;  // a consumer resumed us before the pause landed
  frame_stream::stream_error handoff_error_;
};

}  // namespace gatewayd::suppliers
