// The consumer's "mutex" drain model (consumers::drain_model::mutex), kept apart from the
// strand drain it is measured against: the thread that queued frames writes them itself with
// blocking writes under a per-consumer mutex, as in the strands article's baseline. Only the
// benchmark selects it ([gateway] consumer_drain = "mutex").
#include <sys/socket.h>

#include "consumers/consumer.hpp"

namespace gatewayd::consumers {

using protocol::frame_slice;

namespace {

// The same batch bounds as the strand drain, so the two models differ only in who writes.
constexpr std::size_t sync_batch_frames = 1024;
constexpr std::uint64_t sync_batch_bytes = 1u << 20;

std::uint64_t nanoseconds_since(std::chrono::steady_clock::time_point t0) noexcept {
  return static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

void consumer::write_in_caller() {
  std::unique_lock writer(write_mutex_, std::try_to_lock);
  if (!writer.owns_lock()) {
    const auto t0 = std::chrono::steady_clock::now();
    writer.lock();
    stats_.blocked_lock_ns.fetch_add(nanoseconds_since(t0), std::memory_order_relaxed);
  }
  std::uint64_t conn = 0;
  bool more = false;
  bool tell_strand = false;  // waiters to resume or a drain to finish: strand business
  {
    std::lock_guard lock(mutex_);
    more = take_sync_batch_locked(conn);
    tell_strand = !more && (closing_ || (!waiters_.empty() && below_low_water_locked()));
  }
  std::uint64_t write_ns = 0;
  while (more) {
    sync_buffers_.clear();
    const frame_slice* prev = nullptr;
    std::uint64_t batch_bytes = 0;
    for (const auto& f : sync_batch_) {
      if (prev && prev->adjacent(f)) {
        const asio::const_buffer last = sync_buffers_.back();
        sync_buffers_.back() = asio::const_buffer(last.data(), last.size() + f.size);
      } else {
        sync_buffers_.emplace_back(f.data(), f.size);
      }
      batch_bytes += f.size;
      prev = &f;
    }
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    // Blocks until the kernel took it all (Asio polls for writability on a full buffer), or
    // fails when the strand shuts the socket down (close_link_socket).
    const std::size_t n = asio::write(socket_, sync_buffers_, ec);
    write_ns += nanoseconds_since(t0);

    const std::span<const frame_slice> batch(sync_batch_);
    const auto [sent, sent_bytes] = settle_written(batch, n);
    const auto rest = batch.subspan(sent);
    std::uint64_t discarded = 0;
    {
      std::lock_guard lock(mutex_);
      if (!rest.empty()) {
        if (discard_in_flight_) {
          release_slices(rest);
          discarded = rest.size();
          if (opts_.budget) opts_.budget->release(batch_bytes - sent_bytes);
        } else {
          queue_.push_front_batch(rest);  // sent whole on the next connection
        }
      }
      discard_in_flight_ = false;
      sync_batch_.clear();
      publish_depth_locked();
      if (ec) {
        writing_ = false;
        more = false;
      } else {
        more = take_sync_batch_locked(conn);
      }
      tell_strand = !more && (closing_ || (!waiters_.empty() && below_low_water_locked()));
    }
    if (discarded) {
      stats_.dropped[static_cast<std::size_t>(drop_reason::slow_consumer)].fetch_add(
          discarded, std::memory_order_relaxed);
    }
    if (ec) {
      asio::post(strand_,
                 [self = shared_from_this(), conn, ec] { self->connection_lost(conn, ec); });
    }
  }
  writer.unlock();
  if (write_ns) stats_.blocked_write_ns.fetch_add(write_ns, std::memory_order_relaxed);
  if (tell_strand) {
    asio::post(strand_, [self = shared_from_this()] {
      {
        std::lock_guard lock(self->mutex_);
        self->collect_resumable_locked();
      }
      self->resume_collected();
      self->check_drain();
    });
  }
}

// Under mutex_ and write_mutex_: writing_ marks the batch out, as for the strand drain, so the
// disconnect policy and drain_and_close see it.
bool consumer::take_sync_batch_locked(std::uint64_t& conn) {
  if (!connected_ || queue_.empty()) {
    writing_ = false;
    return false;
  }
  writing_ = true;
  sync_batch_.clear();
  queue_.take(sync_batch_frames, sync_batch_bytes, sync_batch_);
  conn = conn_id_;
  publish_depth_locked();
  return true;
}

// Strand, after on_connect started the read: callers may write from now on. What queued while
// the link was down is written off the strand (on any pool thread), so a blocking write never
// holds up the strand's timers.
void consumer::publish_connected_for_callers(std::uint64_t conn) {
  {
    std::lock_guard lock(mutex_);
    if (conn != conn_id_) return;
    connected_ = true;
  }
  asio::post(strand_.get_inner_executor(),
             [self = shared_from_this()] { self->write_in_caller(); });
}

void consumer::close_link_socket() {
  std::error_code ignored;
  if (opts_.drain == drain_model::mutex && socket_.is_open()) {
    // Wakes a writer blocked on a full send buffer (its write fails with EPIPE), then waits for
    // it to let go: closing under its feet could hand the descriptor number to another socket.
    ::shutdown(socket_.native_handle(), SHUT_RDWR);
    std::lock_guard writer(write_mutex_);
    socket_.close(ignored);
    return;
  }
  socket_.close(ignored);
}

}  // namespace gatewayd::consumers
