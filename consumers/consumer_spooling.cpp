// The consumer's side of its spool (consumer_spool.hpp): put() sends frames to the disk while it
// spools, what it holds in memory goes there when it is away or behind, and reads come back into
// its queue when it is connected and its queue is short.
#include <limits>

#include "consumers/consumer.hpp"
#include "runtime/log.hpp"

namespace gatewayd::consumers {

namespace {
// One read brings back about one write batch; reads go on while the queue holds less than four:
// enough for the writer to go on through the spool thread's group commit (an fdatasync of a few
// ms, during which it answers no read), and the bound on what a spool's copies take in memory.
// Bytes, not queue_capacity: a read of 1 MiB is ~7,000 small frames, and a queue_capacity of
// 10,000 would leave one read out at a time, the writer starved at every sync.
constexpr std::size_t spool_read_bytes = write_batch::max_bytes;
constexpr std::uint64_t spool_read_below = 4 * write_batch::max_bytes;
}  // namespace

bool consumer::open_spool(spool_thread& spools, const std::filesystem::path& dir,
                          std::uint64_t max_bytes, std::error_code& ec) {
  const std::shared_ptr<spool_events> events(shared_from_this(), static_cast<spool_events*>(this));
  auto s = spools.open(dir, max_bytes, &stats_.confirms_settled, events, ec);
  if (!s) return false;
  const auto& st = s->stats();
  if (const auto held = st.frames.load(std::memory_order_relaxed)) {
    GW_LOG(info) << "consumer " << name_ << ": spool " << dir.string() << " holds " << held
                 << " frames (" << st.bytes.load(std::memory_order_relaxed)
                 << " bytes), delivered first";
  }
  if (const auto torn = st.torn_records_cut.load(std::memory_order_relaxed)) {
    GW_LOG(warning) << "consumer " << name_ << ": spool " << dir.string()
                    << " had a torn tail: " << torn << " record(s), "
                    << st.torn_bytes_cut.load(std::memory_order_relaxed) << " bytes cut";
  }
  std::lock_guard lock(mutex_);
  spool_.attach(std::move(s));
  // An `ack` consumer's spooled frames leave the spool once acknowledged, not once written.
  if (acks_.acks())
    acks_.observe([this](std::span<const frame_slice> frames) { spool_delivered(frames); });
  return true;
}

bool consumer::spools_locked() const noexcept {
  if (!spool_.on() || closing_.now() >= life::closed) return false;
  // In order: once anything is on the disk, new frames go behind it.
  if (spool_.spooling()) return true;
  // Away or behind: nothing waits in memory for it (its suppliers' confirms would wait too).
  if (!writable(flow_) || flow_ == flow::congested) return true;
  // Connected and its queue full: instead of its overflow policy, the disk.
  return at_limit(queue_, limits_);
}

bool consumer::spool_put_locked(std::span<const frame_slice> frames, put_result& result,
                                const std::shared_ptr<flow_control_listener>& listener) {
  bool resume = false;
  if (!spool_.spooling()) {
    spool_.enter(consumer_spool::mode::spooling);
    // Suppliers paused while its queue filled go on: what comes now goes to the disk. Resumed
    // on the strand, which alone resumes (paused_suppliers), not on this supplier's thread.
    resume = !paused_.empty_locked();
  }
  // Owed until synced (the spool settles them then), as any frame it takes.
  take_confirms_locked(confirms_in(frames));
  // A full spool refuses them (its thread rejects and counts them); backpressure pauses the
  // suppliers instead, until a delivery frees room.
  if (spool_.full() && limits_.policy == overflow_policy::backpressure) {
    result.pause_supplier = true;
    result.paused_by_consumer = true;
    paused_.add(listener);
  }
  spool_.append(frames);
  result.queued = static_cast<std::uint32_t>(frames.size());
  // The disk behind the suppliers by a few MiB: they pause, as at a keeping-up consumer's
  // high-water mark (the gateway's own lag, not this consumer's), until it has caught up.
  if (spool_behind(spool_events::behind_bytes)) {
    result.pause_supplier = true;
    paused_.add(listener);
  }
  return resume;
}

void consumer::spool_may_resume() {
  asio::post(strand_, [self = shared_from_this()] { self->resume_if_below_low_water(); });
}

// Behind keeps (or starts) a pause, so `behind` is set before pending_bytes is read again, and
// the spool thread lowers pending_bytes before it reads `behind` (both sequentially consistent):
// either this read sees it caught up already, or the thread sees `behind` and calls
// spool_may_resume(). No pause is left unended, though more frames come after the thread cleared
// `behind` (from suppliers that did not pause).
bool consumer::spool_behind(std::uint64_t by) const noexcept {
  spool* s = spool_.files().get();
  if (!s) return false;
  auto& st = s->stats();
  if (st.pending_bytes.load(std::memory_order_relaxed) <= by) return false;
  st.behind.store(true);
  return st.pending_bytes.load() > by;
}

void consumer::spool_read_done(std::vector<frame_slice> frames, std::uint64_t generation) {
  // The spool thread: the consumer's strand takes it from here.
  asio::post(strand_, [self = shared_from_this(), frames = std::move(frames),
                       generation]() mutable { self->take_spool_read(frames, generation); });
}

void consumer::take_spool_read(std::vector<frame_slice>& frames, std::uint64_t generation) {
  bool start = false;
  bool taken = false;
  {
    std::lock_guard lock(mutex_);
    taken = closing_.now() < life::closed && spool_.read_back(frames, generation);
    if (taken && !frames.empty()) {
      // Behind what it holds: older frames (a queue that filled before it spooled) go first.
      queue_.push_back_run(frames, count(frames).bytes);
      if (opts_.budget) opts_.budget->take(count(frames).bytes);
      publish_depth_locked();
      if (writable(flow_) && writer_ == writer::idle) {
        enter_writer_locked(writer::writing);
        start = true;
      }
    }
    if (taken && spool_.spooling() && spool_.drained()) spool_.enter(consumer_spool::mode::memory);
  }
  if (!taken) {
    protocol::reject_slices(frames, std::nullopt);  // stale: the spool reads them again
    frames.clear();
  }
  if (start) drain_.start(false);
  read_spool_if_due();
}

void consumer::read_spool_if_due() {
  if (!spool_.on()) return;
  std::lock_guard lock(mutex_);
  if (closing_.now() != life::open || !writable(flow_) || flow_ == flow::congested) return;
  if (queue_.bytes() >= spool_read_below) return;
  spool_.read_if_due(spool_read_bytes);
}

void consumer::spill_if_away() {
  if (!spool_.on()) return;
  {
    std::lock_guard lock(mutex_);
    const bool down = !writable(flow_);
    if (closing_.now() >= life::closed || (!down && flow_ != flow::congested)) return;
    // Written and not acknowledged on a connection that is gone: older than the queue. On one
    // that is up (it fell behind) they stay: their acks may still come.
    if (!spill_locked(down)) return;
    if (below_low_water_locked()) paused_.release_locked();
  }
  paused_.resume_released();
}

bool consumer::spool_at_end() {
  bool idle = false;
  {
    std::lock_guard lock(mutex_);
    if (closing_.now() != life::draining) return false;
    // What older tables still route to it goes to disk too.
    if (!spool_.spooling()) spool_.enter(consumer_spool::mode::spooling);
    idle = writer_ == writer::idle;
    // Unacknowledged frames go too when no write is out: delivered again after the start, at
    // least once.
    spill_locked(idle);
  }
  if (!idle) {
    // A write is out, to a socket that may never take it: the drain ends now; the write comes
    // back (failed: its frames to the queue) and complete_close() spools what is left.
    end_drain();
  } else if (spool_.first_flush()) {
    spool_.files()->flush(
        [self = shared_from_this()] { asio::post(self->strand_, [self] { self->end_drain(); }); });
  }
  return true;
}

bool consumer::spill_locked(bool unacked_too) {
  // A write out is younger than what acknowledgements await: with those in `held`, copies in
  // its batch would sit between frames spilled, which the spool cannot keep in order. It waits
  // for the write to come back (take_batch() spills then).
  if (unacked_too && writer_ != writer::idle && spool_.has_copies()) return false;
  std::vector<frame_slice> held;
  if (unacked_too) acks_.hand_over(held);
  const frame_counts queued = queue_.take(std::numeric_limits<std::size_t>::max(),
                                          std::numeric_limits<std::uint64_t>::max(), held);
  if (held.empty()) return false;
  if (opts_.budget) opts_.budget->give_back(queued.bytes);
  spool_.spill(held);
  publish_depth_locked();
  return true;
}

void consumer::spool_delivered(std::span<const frame_slice> frames) {
  spool_.delivered(frames);
  std::lock_guard lock(mutex_);
  if (spool_.spooling() && spool_.drained()) spool_.enter(consumer_spool::mode::memory);
}

}  // namespace gatewayd::consumers
