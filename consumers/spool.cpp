// A consumer's spool: its calls queue jobs for the spool thread (spool_thread.cpp), and the
// jobs' work on its segment_log, on the spool thread.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "consumers/spool_thread.hpp"
#include "runtime/log.hpp"

namespace gatewayd::consumers {

spool::spool(spool_thread& thread, std::filesystem::path dir, std::unique_ptr<segment_log> log,
             std::uint64_t max_bytes, std::atomic<std::uint64_t>* settled,
             std::weak_ptr<spool_events> events)
    : thread_(thread),
      dir_(std::move(dir)),
      log_(std::move(log)),
      max_bytes_(max_bytes),
      settled_(settled),
      events_(std::move(events)) {}

// Here only when the spool thread holds no reference (spool_thread.cpp): files closed, no I/O.
// Frames still unsynced (a sync that failed until the thread stopped) were never durable: left
// unsettled, their suppliers resend them.
spool::~spool() {
  protocol::confirm_settlements settlements;
  for (protocol::confirm_entry* e : unsynced_)
    settlements.given_up(*e, std::nullopt);
  settlements.flush();
  if (settled_ && !unsynced_.empty())
    settled_->fetch_add(unsynced_.size(), std::memory_order_relaxed);
}

namespace {
std::uint64_t bytes_of(std::span<const protocol::frame_slice> frames) noexcept {
  std::uint64_t bytes = 0;
  for (const auto& f : frames)
    bytes += f.size;
  return bytes;
}
}  // namespace

void spool::taken(std::span<const protocol::frame_slice> frames) noexcept {
  const std::uint64_t bytes = bytes_of(frames);
  // Sequentially consistent, as the consumer's store of `behind` and read of pending_bytes
  // (consumer_spooling.cpp): a pause it made is always ended here.
  const std::uint64_t before = stats_.pending_bytes.fetch_sub(bytes);
  if (before - bytes > spool_events::caught_up_bytes) return;
  if (!stats_.behind.exchange(false)) return;
  if (const auto events = events_.lock()) events->spool_may_resume();
}

void spool::append(std::span<const protocol::frame_slice> frames) {
  if (frames.empty()) return;
  stats_.pending_bytes.fetch_add(bytes_of(frames), std::memory_order_relaxed);
  thread_.post({self_.lock(),
                spool_thread::job::kind::append,
                0,
                0,
                std::vector<protocol::frame_slice>(frames.begin(), frames.end()),
                {}});
}

void spool::prepend(std::span<const protocol::frame_slice> frames) {
  if (frames.empty()) return;
  stats_.pending_bytes.fetch_add(bytes_of(frames), std::memory_order_relaxed);
  thread_.post({self_.lock(),
                spool_thread::job::kind::prepend,
                0,
                0,
                std::vector<protocol::frame_slice>(frames.begin(), frames.end()),
                {}});
}

void spool::read(std::size_t max_bytes, std::uint64_t generation) {
  thread_.post({self_.lock(), spool_thread::job::kind::read, max_bytes, generation, {}, {}});
}

void spool::consume(std::uint64_t n) {
  if (n == 0) return;
  thread_.post({self_.lock(), spool_thread::job::kind::consume, n, 0, {}, {}});
}

void spool::rewind(std::uint64_t keep) {
  thread_.post({self_.lock(), spool_thread::job::kind::rewind, keep, 0, {}, {}});
}

void spool::flush(std::function<void()> done) {
  thread_.post({self_.lock(), spool_thread::job::kind::flush, 0, 0, {}, std::move(done)});
}

void spool::set_max_bytes(std::uint64_t bytes) noexcept {
  max_bytes_.store(bytes, std::memory_order_relaxed);
}

// Appended (settled at the next sync) or prepended (durable already: settled now), or refused
// whole. The records are the frames' bytes as they would go downstream.
void spool::store(std::vector<protocol::frame_slice>& frames, bool in_front) {
  std::uint64_t bytes = 0;
  records_.clear();
  for (const auto& f : frames) {
    records_.emplace_back(reinterpret_cast<const std::byte*>(f.data()), f.size);
    bytes += f.size;
  }
  taken(frames);
  if (log_->bytes() + bytes > max_bytes_.load(std::memory_order_relaxed)) {
    refuse(frames, {});
    return;
  }
  const std::error_code ec = in_front ? log_->prepend(records_) : log_->append(records_);
  if (ec) {
    refuse(frames, ec);
    return;
  }
  stats_.written_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  stats_.written_bytes.fetch_add(bytes, std::memory_order_relaxed);
  held_changed();
  if (in_front) {
    protocol::deliver_slices(frames, settled_);
  } else {
    // The bytes are in the log's buffer: the read chunks go back now, not at the sync (a fast
    // supplier's reads are not pinned for a sync interval); a CONFIRM frame's entry waits.
    protocol::release_batch released;
    for (const auto& f : frames) {
      if (f.confirm) unsynced_.push_back(f.confirm);
      released.add(f.chunk);
    }
  }
  frames.clear();
  if (!in_front) thread_.listed(*this);
}

void spool::refuse(std::span<const protocol::frame_slice> frames, std::error_code ec) {
  protocol::reject_slices(frames, protocol::reject_reason::dropped, settled_);
  stats_.refused_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  stats_.full.store(true, std::memory_order_relaxed);
  if (ec) count_error(ec);
}

void spool::count_error(std::error_code ec) noexcept {
  if (ec == std::errc::no_space_on_device) {
    stats_.no_space.fetch_add(1, std::memory_order_relaxed);
  } else {
    stats_.io_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void spool::held_changed() noexcept {
  stats_.frames.store(log_->records(), std::memory_order_relaxed);
  stats_.bytes.store(log_->bytes(), std::memory_order_relaxed);
  stats_.oldest_ms.store(log_->oldest_ms().value_or(0), std::memory_order_relaxed);
}

namespace {
// A read's records copied straight from the log's window into one chunk, a slice each (one
// reference per record): the one copy between the file and the socket. `capacity`: what the
// read can give at most (the first record may be longer still).
class chunk_filler final : public segment_log::record_sink {
 public:
  chunk_filler(std::size_t capacity, std::vector<protocol::frame_slice>& frames)
      : capacity_(capacity), frames_(frames) {}
  ~chunk_filler() { finish(); }
  chunk_filler(const chunk_filler&) = delete;
  chunk_filler& operator=(const chunk_filler&) = delete;

  void take(std::span<const std::byte> payload) override {
    const auto size = static_cast<std::uint32_t>(payload.size());
    // Within `capacity` after the first record, as read() promises; a second chunk otherwise.
    if (!chunk_ || chunk_->capacity() - at_ < size) {
      finish();
      chunk_ = protocol::frame_chunk::acquire(std::max<std::size_t>(capacity_, size));
    }
    std::memcpy(chunk_->data() + at_, payload.data(), size);
    frames_.push_back({chunk_, at_, size, nullptr});
    at_ += size;
    ++slices_;
  }

 private:
  void finish() noexcept {
    if (chunk_ && slices_ > 1) chunk_->add_refs(slices_ - 1);  // it came with one
    chunk_ = nullptr;
    at_ = 0;
    slices_ = 0;
  }

  const std::size_t capacity_;
  std::vector<protocol::frame_slice>& frames_;
  protocol::frame_chunk* chunk_ = nullptr;
  std::uint32_t at_ = 0;
  std::uint32_t slices_ = 0;
};
}  // namespace

void spool::read_now(std::size_t max_bytes, std::uint64_t generation) {
  const std::shared_ptr<spool_events> events = events_.lock();
  if (!events) return;  // nobody to answer: nothing read
  std::vector<protocol::frame_slice> frames;
  frames.reserve(last_read_frames_);
  std::error_code ec;
  {
    chunk_filler filler(
        static_cast<std::size_t>(std::min<std::uint64_t>(max_bytes, log_->unread_bytes())), frames);
    ec = log_->read(max_bytes, filler);
  }
  if (ec) {
    // A record bad on disk after open() (its checksum, a short file): the records before it
    // are answered (the cursor is past them), and it is read again next time.
    count_error(ec);
    GW_LOG_LIMITED(error, "spool read errors")
        << "spool " << dir_.string() << ": read: "
        << (ec == std::errc::illegal_byte_sequence
                ? std::string("a record fails its checksum or does not fit its file")
                : ec.message())
        << "; the consumer's delivery from its spool stops at that record";
    // Stuck at it, nothing before it: no answer. An empty one would say the spool is read
    // out, and the consumer would send what comes next from memory, ahead of every record
    // behind this one. Unanswered, its read stays out: it reads no more and new frames go
    // behind what the spool holds, in order, until a spill asks again or a restart (whose
    // open() cuts the bad record and what follows it, counted as torn).
    if (frames.empty()) return;
  }
  last_read_frames_ = frames.size();
  if (!frames.empty()) stats_.read_frames.fetch_add(frames.size(), std::memory_order_relaxed);
  events->spool_read_done(std::move(frames), generation);
}

void spool::consume_now(std::uint64_t n) {
  if (const std::error_code ec = log_->consume(n)) {
    count_error(ec);
    GW_LOG_LIMITED(error, "spool consume errors")
        << "spool " << dir_.string() << ": consume " << n << ": " << ec.message();
  }
  held_changed();
  // Room again: at spool_max_bytes, below it now; out of disk space, a file may have gone, and
  // the next append finds out. Suppliers backpressure paused for it go on (no later delivery
  // may come to say so: this may be the spool's last consume).
  if (log_->bytes() < max_bytes_.load(std::memory_order_relaxed) &&
      stats_.full.exchange(false, std::memory_order_relaxed)) {
    if (const auto events = events_.lock()) events->spool_may_resume();
  }
  thread_.listed(*this);
}

bool spool::sync_now(segment_log::head_durability head) {
  // A head written and not yet due for its fdatasync (segment_log.cpp, sync): listed until it is.
  if (unsynced_.empty() && !log_->sync_due() && head != segment_log::head_durability::now) {
    dirty_ = log_->head_pending();
    return true;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::error_code ec = log_->sync(head);
  const auto took = std::chrono::steady_clock::now() - start;
  stats_.sync_ns.fetch_add(static_cast<std::uint64_t>(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
                           std::memory_order_relaxed);
  stats_.syncs.fetch_add(1, std::memory_order_relaxed);
  if (ec) {
    count_error(ec);
    GW_LOG_LIMITED(error, "spool sync errors")
        << "spool " << dir_.string() << ": sync: " << ec.message();
    return false;
  }
  {
    protocol::confirm_settlements settlements;
    for (protocol::confirm_entry* e : unsynced_)
      settlements.delivered(*e);
  }
  if (settled_ && !unsynced_.empty())
    settled_->fetch_add(unsynced_.size(), std::memory_order_relaxed);
  unsynced_.clear();
  dirty_ = log_->head_pending();
  return true;
}

}  // namespace gatewayd::consumers
