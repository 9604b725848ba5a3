// One consumer of the model harness: a bounded queue under the configured overflow policy,
// written by the strand drain (the design) or the mutex drain (the strands article's baseline).
#pragma once

#include <array>
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "consumers/admission.hpp"
#include "consumers/consumer_spec.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/write_batch.hpp"
#include "net/endpoint.hpp"
#include "protocol/frame_chunk.hpp"
#include "runtime/enum_names.hpp"
#include "runtime/executor.hpp"

namespace gatewayd::harness {

using protocol::frame_slice;

enum class drain_kind : std::uint8_t { strand, mutex };
inline constexpr runtime::enum_names<drain_kind, 2> drain_kind_names{{"strand", "mutex"}};

// A supplier a consumer may pause: each hold() is matched by one release() once the consumer
// has room again; the supplier reads on when nobody holds it.
class flow_listener {
 public:
  virtual void hold() noexcept = 0;
  virtual void release() = 0;

 protected:
  ~flow_listener() = default;
};

// What the driver scrapes (relaxed atomics: written on the data path, read by /metrics).
struct consumer_counters {
  std::atomic<std::uint64_t> queued{0};
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> pauses{0};  // suppliers held by this consumer's marks or limits
  std::array<std::atomic<std::uint64_t>, consumers::drop_reason_count> dropped{};
  std::atomic<std::uint64_t> blocked_lock_ns{0};   // waiting for the queue or writer lock
  std::atomic<std::uint64_t> blocked_write_ns{0};  // inside the mutex drain's blocking writes
};

class harness_consumer : public std::enable_shared_from_this<harness_consumer> {
 public:
  // The product's consumer in three states: it pauses its suppliers at the gateway's high-water
  // mark while its socket takes everything (keeping_up); once the socket refuses bytes only a
  // full queue pauses them (refusing); after `slow_after` of that its overflow policy applies
  // (congested). Emptying the queue makes it keeping_up again. The mutex drain never sees a
  // full socket (it blocks), so it stays keeping_up.
  enum class flow : std::uint8_t { keeping_up, refusing, congested };

  harness_consumer(const runtime::executor& ex, const consumers::consumer_spec& spec,
                   drain_kind drain, std::chrono::milliseconds slow_after);
  harness_consumer(const harness_consumer&) = delete;
  harness_consumer& operator=(const harness_consumer&) = delete;

  // Dials the endpoint once, at start-up (throws); there is no redial.
  void connect();
  // Any thread. Takes over one chunk reference per frame, queues or drops each under the
  // policy, and starts a writer when none runs. When the supplier must pause it is held here
  // (flow_listener::hold) and released once this consumer has room.
  void put(std::span<const frame_slice> frames, const std::shared_ptr<flow_listener>& supplier);

  const std::string& name() const noexcept { return name_; }
  const consumer_counters& counters() const noexcept { return counters_; }

 private:
  // The transitions of `flow`, in one place (under mutex_).
  void set_flow_locked(flow next);
  bool must_pause_locked() const noexcept;
  bool may_resume_locked() const noexcept;
  using paused_list = std::vector<std::shared_ptr<flow_listener>>;
  // Under mutex_: the suppliers to release now (they are released outside the lock).
  paused_list resumable_locked();
  // The writer, under mutex_: the next batch, or false (the queue is empty: the writer role is
  // given up and the consumer keeps up again).
  bool take_batch_locked();
  // The writer: next batch as take_batch_locked, releasing the suppliers there is room for.
  bool next_batch();
  void count_sent(const consumers::frame_counts& sent) noexcept;

  // The strand drain (strand).
  void run_strand();
  void wait_writable();
  void socket_refused();
  void on_grace_timer(std::error_code ec);
  // The mutex drain (the caller's thread).
  void write_blocking();

  [[noreturn]] void fail(std::string_view what, std::error_code ec);

  const std::string name_;
  const net::endpoint endpoint_;
  const drain_kind drain_;
  const std::chrono::milliseconds slow_after_;
  runtime::strand strand_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer grace_timer_;  // strand: refusing -> congested
  consumer_counters counters_;

  std::mutex mutex_;  // the queue, the flow state, the writer role, the paused suppliers
  consumers::frame_queue queue_;
  const consumers::queue_limits limits_;
  flow flow_ = flow::keeping_up;
  bool writing_ = false;  // strand drain: a writer runs or is on its way
  paused_list paused_;

  std::mutex writer_;             // mutex drain: one blocking writer at a time
  consumers::write_batch batch_;  // the writer's (strand, or under writer_)
};

}  // namespace gatewayd::harness
