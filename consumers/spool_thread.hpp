// The thread that owns every consumer spool's files (segment_log): it appends what consumers hand
// it, makes it durable by group commit on an interval, settles the CONFIRM frames so made durable,
// reads records back into frame chunks for their consumers and deletes what they delivered (its
// file_reaper unlinks the files, on a thread of its own). No Leader/Followers thread or consumer
// strand ever waits on a disk (../shared/design.md, Spool).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <system_error>
#include <thread>
#include <vector>

#include "consumers/file_reaper.hpp"
#include "consumers/segment_log.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::consumers {

// One consumer's spool, as /metrics and its consumer see it. Written by the spool thread (and
// `full` also by the consumer), read by any thread.
struct spool_stats {
  std::atomic<std::uint64_t> frames{0};          // held: appended, not consumed
  std::atomic<std::uint64_t> bytes{0};           // their payload bytes
  std::atomic<std::int64_t> oldest_ms{0};        // append time of the oldest held frame (0: none)
  std::atomic<std::uint64_t> written_frames{0};  // appended, all time
  std::atomic<std::uint64_t> written_bytes{0};
  std::atomic<std::uint64_t> read_frames{0};  // read back for delivery, all time
  std::atomic<std::uint64_t> syncs{0};
  std::atomic<std::uint64_t> sync_ns{0};  // time spent in sync(), all time
  std::atomic<std::uint64_t> torn_records_cut{0};
  std::atomic<std::uint64_t> torn_bytes_cut{0};
  // Frames it refused (at spool_max_bytes, out of disk space, an I/O error): rejected as dropped.
  std::atomic<std::uint64_t> refused_frames{0};
  std::atomic<std::uint64_t> no_space{0};   // appends or syncs that met ENOSPC
  std::atomic<std::uint64_t> io_errors{0};  // any other error of its files
  // At spool_max_bytes or out of disk space: new frames are refused (or their suppliers paused)
  // until a delivery frees room. Set by the spool thread, cleared by it on consume (then
  // spool_events::spool_may_resume is called).
  std::atomic<bool> full{false};
  // Bytes handed to the spool thread and not yet written to its log: what the disk is behind
  // by. Past a few MiB the consumer pauses the suppliers feeding it (the gateway's own lag, as
  // at a keeping-up consumer's high-water mark); spool_events::spool_may_resume says when it is
  // down again, if `behind` was set.
  std::atomic<std::uint64_t> pending_bytes{0};
  std::atomic<bool> behind{false};
};

// What a spool tells its consumer, on the spool thread: nothing here may block (post to a strand).
class spool_events {
 public:
  // The answer to spool::read(`generation`): the records read, oldest first, each slice owning
  // one reference to a chunk of its own (confirm null: what the spool holds was settled when it
  // was synced). Empty when nothing was unread. None when the read stopped at a record it
  // cannot read before any other (spool.cpp, read_now).
  virtual void spool_read_done(std::vector<protocol::frame_slice> frames,
                               std::uint64_t generation) = 0;
  // The suppliers it paused may go on: stats().behind was set and pending_bytes is down to
  // `caught_up_bytes`, or `full` was cleared by a consume.
  virtual void spool_may_resume() {}
  static constexpr std::uint64_t behind_bytes = 8u << 20;
  static constexpr std::uint64_t caught_up_bytes = 4u << 20;

 protected:
  ~spool_events() = default;
};

class spool_thread;

// One consumer's spool: the calls queue work for the spool thread, which does it in call order.
// Any thread may call; the consumer makes them from its strand or under its lock.
class spool {
 public:
  // Behind everything it holds, in order. The references and CONFIRM entries move with the
  // frames: once synced, each is settled as delivered (counted in the consumer's settled
  // counter given to spool_thread::open) and released. Refused (spool_max_bytes reached,
  // ENOSPC, EIO: stats().full set, counted in refused_frames): each rejected as dropped.
  void append(std::span<const protocol::frame_slice> frames);
  // In front of everything it holds, read first: frames older than what it holds (a failed
  // write's, an `ack` consumer's unacknowledged ones), once nothing it holds is read and not
  // consumed (after rewind()). Settled, or refused, as append() says.
  void prepend(std::span<const protocol::frame_slice> frames);
  // Up to max_bytes of the records after the read cursor (at least one, if any), answered once
  // by spool_events::spool_read_done with `generation`.
  void read(std::size_t max_bytes, std::uint64_t generation);
  // The oldest `n` records read were delivered (written, or acknowledged): gone for good.
  void consume(std::uint64_t n);
  // What was read and not consumed is read again, from the oldest after the `keep` oldest
  // (copies still out: written or acknowledged later, consumed then).
  void rewind(std::uint64_t keep = 0);
  // Makes everything appended so far durable now (a graceful stop), then calls `done` on the
  // spool thread.
  void flush(std::function<void()> done);
  // A reload changed spool_max_bytes.
  void set_max_bytes(std::uint64_t bytes) noexcept;

  const spool_stats& stats() const noexcept { return stats_; }
  spool_stats& stats() noexcept { return stats_; }
  const std::filesystem::path& dir() const noexcept { return dir_; }

  ~spool();
  spool(const spool&) = delete;
  spool& operator=(const spool&) = delete;

 private:
  friend class spool_thread;
  spool(spool_thread& thread, std::filesystem::path dir, std::unique_ptr<segment_log> log,
        std::uint64_t max_bytes, std::atomic<std::uint64_t>* settled,
        std::weak_ptr<spool_events> events);

  // On the spool thread (spool.cpp).
  void store(std::vector<protocol::frame_slice>& frames, bool in_front);
  void refuse(std::span<const protocol::frame_slice> frames, std::error_code ec);
  void read_now(std::size_t max_bytes, std::uint64_t generation);
  void consume_now(std::uint64_t n);
  // False: it failed, what is unsynced stays so. dirty_ stays set while its head waits for its
  // fdatasync.
  bool sync_now(segment_log::head_durability head = segment_log::head_durability::when_due);
  void count_error(std::error_code ec) noexcept;
  void held_changed() noexcept;
  void taken(std::span<const protocol::frame_slice> frames) noexcept;  // off pending_bytes

  spool_thread& thread_;
  const std::filesystem::path dir_;
  spool_stats stats_;
  std::weak_ptr<spool> self_;  // what each job holds a strong reference from
  // The spool thread's alone from here on.
  std::unique_ptr<segment_log> log_;
  std::atomic<std::uint64_t> max_bytes_;
  std::atomic<std::uint64_t>* const settled_;
  const std::weak_ptr<spool_events> events_;
  // Appended CONFIRM frames, settled at the next sync (their chunks went back once the bytes
  // were in the log's buffer).
  std::vector<protocol::confirm_entry*> unsynced_;
  bool dirty_ = false;   // appended or consumed since the last sync, or its head not yet durable
  bool listed_ = false;  // in the spool thread's dirty list (dirty_, or was when last looked at)
  std::vector<std::span<const std::byte>> records_;  // an append's records, reused
  std::size_t last_read_frames_ = 0;                 // what the next read reserves room for
};

class spool_thread {
 public:
  // `sync_interval`: how long an append may wait for the group commit that makes it durable (0:
  // a sync once the work queued so far is done).
  explicit spool_thread(std::chrono::milliseconds sync_interval);
  // Stops (below).
  ~spool_thread();
  spool_thread(const spool_thread&) = delete;
  spool_thread& operator=(const spool_thread&) = delete;

  // Opens (creating it) one consumer's spool in `dir`, on the caller's thread (start-up, a
  // reload): its torn tail cut, counted in its stats. `settled`: the consumer's counter of
  // CONFIRM frames settled; `events`: whom read() answers. Null, with `ec`, when the folder
  // cannot be used.
  std::shared_ptr<spool> open(const std::filesystem::path& dir, std::uint64_t max_bytes,
                              std::atomic<std::uint64_t>* settled,
                              std::weak_ptr<spool_events> events, std::error_code& ec);
  // Does the work queued so far, syncs every spool, and joins. Work queued after it is dropped:
  // references released, CONFIRM frames left unsettled (the gateway stops; their suppliers
  // resend them), reads never answered.
  void stop();

 private:
  // The private part is the implementation's (a job queue under a mutex, a condition variable,
  // the thread, the spools with work not yet synced).
  friend class spool;
  using clock = std::chrono::steady_clock;
  // One call of a spool, queued. It holds its spool, so a spool lives while it has work.
  struct job {
    enum class kind : std::uint8_t { append, prepend, read, consume, rewind, flush };
    std::shared_ptr<spool> target;
    kind what = kind::append;
    std::uint64_t n = 0;           // read: max_bytes; consume: the count; rewind: records kept
    std::uint64_t generation = 0;  // read
    std::vector<protocol::frame_slice> frames;  // append, prepend
    std::function<void()> done;                 // flush
  };

  void post(job j);
  void run();
  void run_job(job& j);
  void listed(spool& s);  // s is dirty: in dirty_ until a sync made it clean
  void sync_all(segment_log::head_durability head = segment_log::head_durability::when_due);
  static void drop(job& j) noexcept;

  const std::chrono::milliseconds sync_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<job> jobs_;   // under mutex_
  bool stopping_ = false;  // under mutex_: stop() was called, new jobs are dropped
  // The spool thread's alone.
  std::deque<job> running_;  // the jobs taken from jobs_ in one go, done outside the lock
  std::vector<std::shared_ptr<spool>> dirty_;  // spools with work to sync, in order listed
  clock::time_point sync_due_{};               // when dirty_ is next synced (non-empty dirty_ only)
  // Unlinks what its spools consumed; outlives the thread (declared before it: destroyed after).
  file_reaper reaper_;
  std::thread thread_;  // last: started once the members above are
};

}  // namespace gatewayd::consumers
