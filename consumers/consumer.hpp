// One downstream consumer as an active object: a bounded queue filled from any thread and
// drained by gathered writes on the consumer's own strand; it dials its endpoint and redials
// with capped, jittered exponential backoff while the queue keeps filling under its policy.
#pragma once

#include <array>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "consumers/backoff.hpp"
#include "consumers/bounded_queue.hpp"
#include "consumers/consumer_spec.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/drain_model.hpp"
#include "consumers/flow_control.hpp"
#include "consumers/queue_budget.hpp"
#include "protocol/frame_chunk.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::consumers {

class consumer : public std::enable_shared_from_this<consumer> {
 public:
  struct options {
    std::chrono::milliseconds reconnect_initial{100};
    std::chrono::milliseconds reconnect_max{30000};
    queue_budget* budget = nullptr;  // gateway-wide byte cap shared by all consumers; may be null
    drain_model drain = drain_model::strand;
  };

  struct put_result {
    std::uint32_t queued = 0;     // frames accepted into the queue
    bool pause_supplier = false;  // backpressure: the caller should stop reading until resumed
  };

  consumer(const runtime::executor& ex, consumer_spec spec, options opts);
  ~consumer();
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  // Starts dialing the endpoint. Call once, after construction (needs shared_from_this).
  void start();

  // Any thread; never blocks on the network. Takes over exactly one chunk reference per slice
  // (the caller added them), whether the frame is queued or dropped, and applies the overflow
  // policy. With the backpressure policy, when the queue is at or above capacity, `listener`
  // (if not null) is remembered and resumed once the queue falls below the low-water mark.
  put_result put(std::span<const protocol::frame_slice> frames,
                 const std::shared_ptr<flow_control_listener>& listener);

  // Reload: capacity, byte cap and policy change in place; a new endpoint redials, keeping the
  // queue. The name never changes.
  void reconfigure(const consumer_spec& spec);

  // Stops taking frames (later puts count as drop reason `removed`), keeps sending what it
  // holds for at most `timeout`, then closes and calls `done(undelivered frames)` once, on the
  // consumer's strand. The frames left are counted as dropped with `reason`.
  void drain_and_close(std::chrono::milliseconds timeout, drop_reason reason,
                       std::function<void(std::uint64_t undelivered)> done);

  const std::string& name() const noexcept { return name_; }
  const consumer_stats& stats() const noexcept { return stats_; }
  std::uint32_t capacity() const noexcept;
  overflow_policy policy() const noexcept;

 private:
  // Where the link to the endpoint stands; strand-only.
  enum class link_state : std::uint8_t { idle, connecting, connected, waiting, closed };

  // Admission of one put() batch under mutex_: the overflow policy, frame by frame.
  struct admission;
  void admit_locked(std::span<const protocol::frame_slice> frames, std::uint64_t batch_bytes,
                    admission& a);

  // Dialing and the link (strand).
  void do_connect();
  void on_connect(std::error_code ec, std::uint64_t dial);
  void schedule_redial();
  void on_redial_timer(std::error_code ec);
  void do_read(std::uint64_t conn);
  void on_read(std::error_code ec, std::size_t n, std::uint64_t conn);
  void connection_lost(std::uint64_t conn, std::error_code ec);
  void close_slow(std::uint64_t conn, std::uint64_t discarded);
  void change_endpoint();
  void drop_link();

  // Draining the queue into the socket (strand).
  void do_drain();
  bool take_batch_locked();
  void write_batch();
  void on_written(std::error_code ec, std::size_t n, std::uint64_t conn);
  // After a write of `batch` that moved `n` bytes (both drain models): the frames the kernel
  // took whole are released, their budget returned and counted as sent. Returns them.
  frame_counts settle_written(std::span<const protocol::frame_slice> batch, std::size_t n);

  // The mutex drain model (any thread, write_mutex_ taken inside).
  void write_in_caller();
  bool take_sync_batch_locked(std::uint64_t& conn);
  void publish_connected_for_callers(std::uint64_t conn);
  // Closes the socket on the strand; under the mutex model first wakes and waits out a
  // blocking write in another thread.
  void close_link_socket();

  // Backpressure: waiters leave under the lock, are resumed outside it (strand).
  bool below_low_water_locked() const noexcept;
  void collect_resumable_locked();
  void resume_collected();
  void publish_depth_locked() noexcept;

  // drain_and_close (strand).
  void begin_drain(std::chrono::milliseconds timeout, drop_reason reason,
                   std::function<void(std::uint64_t)> done);
  void on_drain_timer(std::error_code ec);
  void check_drain();
  void finish_drain();
  void complete_close();

  std::string name_;
  consumer_stats stats_;
  options opts_;
  runtime::strand strand_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer redial_timer_;
  asio::steady_timer drain_timer_;

  // Guards everything down to the strand-only section. One per consumer: puts to different
  // consumers never contend, and it is never held across I/O or a call into other objects.
  mutable std::mutex mutex_;
  bounded_queue queue_;
  net::endpoint endpoint_;
  std::uint32_t capacity_;
  std::uint64_t byte_cap_;  // 0 = none
  overflow_policy policy_;
  bool connected_ = false;  // a drain may write; put() clears it to disconnect a slow consumer
  bool writing_ = false;    // a drain is posted or a write is in flight
  bool closing_ = false;    // drain_and_close() was called: puts are refused
  bool discard_in_flight_ = false;  // the disconnect policy fired during a write
  std::uint64_t conn_id_ = 0;       // the current connection; written on the strand
  std::vector<std::shared_ptr<flow_control_listener>> waiters_;

  // Read without the lock by capacity() and policy().
  std::atomic<std::uint32_t> capacity_view_;
  std::atomic<overflow_policy> policy_view_;

  // Strand-only.
  link_state state_ = link_state::idle;
  backoff backoff_;
  net::endpoint link_endpoint_;      // what the current dial or connection is for
  std::uint64_t dial_id_ = 0;        // completions of superseded dials are ignored
  std::uint32_t dial_failures_ = 0;  // since the last state change: logs once, not per retry
  bool was_connected_ = false;       // the next dial counts as a reconnect
  std::vector<protocol::frame_slice> in_flight_;  // owns a reference per frame
  std::uint64_t in_flight_bytes_ = 0;
  std::vector<asio::const_buffer> buffers_;  // in_flight_ with neighbours coalesced
  std::vector<std::shared_ptr<flow_control_listener>> resuming_;
  std::array<char, 256> discard_{};  // consumers send nothing; whatever arrives lands here
  bool draining_ = false;
  bool finishing_ = false;
  bool closed_ = false;
  drop_reason drain_reason_ = drop_reason::shutdown;
  std::chrono::steady_clock::time_point drain_deadline_{};
  std::vector<std::function<void(std::uint64_t)>> done_;

  // The mutex drain model: held by the one thread writing to the socket (taken before mutex_).
  std::mutex write_mutex_;
  std::vector<protocol::frame_slice> sync_batch_;  // under write_mutex_; a ref per frame
  std::vector<asio::const_buffer> sync_buffers_;   // under write_mutex_
};

}  // namespace gatewayd::consumers
