// The spool thread's loop: the job queue, the group commit on an interval, open and stop.
//
// Who destroys a spool, and where: every job holds a shared_ptr to its spool, and the thread
// keeps one in dirty_ for each spool with appends, consumes or CONFIRM frames not yet synced;
// jobs are destroyed on the spool thread once done, and dirty_ is emptied only by a sync or by
// the thread's end. So while the spool thread may still touch a spool's files, it holds a
// reference, and the last reference drops either there or, once the spool has no work left,
// wherever its consumer lets go: then nobody else touches it, and ~spool only closes its files
// (and lets go of frames a failed sync left unsettled). Jobs dropped by a stopped thread were
// never queued, so they hold no spool that the thread could touch.
#include "consumers/spool_thread.hpp"

#include <algorithm>
#include <utility>

#include "runtime/thread_name.hpp"

namespace gatewayd::consumers {

namespace {
// A failed sync (ENOSPC, EIO) is retried after the interval, and not sooner than this.
constexpr std::chrono::milliseconds sync_retry{50};
}  // namespace

spool_thread::spool_thread(std::chrono::milliseconds sync_interval)
    : sync_interval_(std::max(sync_interval, std::chrono::milliseconds{0})),
      thread_([this] { run(); }) {}

spool_thread::~spool_thread() {
  stop();
}

std::shared_ptr<spool> spool_thread::open(const std::filesystem::path& dir, std::uint64_t max_bytes,
                                          std::atomic<std::uint64_t>* settled,
                                          std::weak_ptr<spool_events> events, std::error_code& ec) {
  segment_log_opened opened;
  segment_log_options options;
  options.reaper = &reaper_;
  auto log = segment_log::open(dir, options, opened, ec);
  if (!log) return nullptr;
  std::shared_ptr<spool> s(
      new spool(*this, dir, std::move(log), max_bytes, settled, std::move(events)));
  s->self_ = s;
  s->stats_.torn_records_cut.store(opened.torn_records_cut, std::memory_order_relaxed);
  s->stats_.torn_bytes_cut.store(opened.torn_bytes_cut, std::memory_order_relaxed);
  // Published to the spool thread by mutex_ with the first job.
  s->held_changed();
  return s;
}

void spool_thread::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// The caller's thread: never a file, and nothing settled under the lock (a settlement may wake
// a supplier's session).
void spool_thread::post(job j) {
  bool queued = false, wake = false;
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      // The thread sleeps only on an empty queue: one wake-up per burst, not one per job.
      wake = jobs_.empty();
      jobs_.push_back(std::move(j));
      queued = true;
    }
  }
  if (!queued) {
    drop(j);
  } else if (wake) {
    wake_.notify_one();
  }
}

// A job after stop(): references released, CONFIRM frames left unsettled (the gateway stops:
// their suppliers resend them), a read never answered, a flush's `done` never called.
void spool_thread::drop(job& j) noexcept {
  j.target->taken(j.frames);
  protocol::reject_slices(j.frames, std::nullopt, j.target->settled_);
  j.frames.clear();
  j.target.reset();
}

void spool_thread::run() {
  runtime::name_this_thread("gw-spool");
  std::unique_lock lock(mutex_);
  for (;;) {
    if (jobs_.empty()) {
      if (stopping_) break;
      if (dirty_.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      } else if (clock::now() < sync_due_) {
        wake_.wait_until(lock, sync_due_, [this] { return stopping_ || !jobs_.empty(); });
      } else {
        lock.unlock();
        sync_all();
        lock.lock();
      }
      continue;
    }
    running_.swap(jobs_);
    lock.unlock();
    for (job& j : running_)
      run_job(j);
    running_.clear();  // the jobs' spool references drop here, on this thread
    // Due while jobs keep coming: the group commit does not wait for an idle queue.
    if (!dirty_.empty() && clock::now() >= sync_due_) sync_all();
    lock.lock();
  }
  lock.unlock();
  sync_all(segment_log::head_durability::now);
  // What a failed sync left is let go with its spool, unsettled (~spool).
  dirty_.clear();
}

void spool_thread::run_job(job& j) {
  spool& s = *j.target;
  switch (j.what) {
    case job::kind::append:
    case job::kind::prepend:
      s.store(j.frames, j.what == job::kind::prepend);
      break;
    case job::kind::read:
      s.read_now(static_cast<std::size_t>(j.n), j.generation);
      break;
    case job::kind::consume:
      s.consume_now(j.n);
      break;
    case job::kind::rewind:
      s.log_->rewind(j.n);
      break;
    case job::kind::flush:
      s.sync_now(segment_log::head_durability::now);
      if (j.done) j.done();
      break;
  }
}

void spool_thread::listed(spool& s) {
  s.dirty_ = true;
  if (s.listed_) return;
  s.listed_ = true;
  if (dirty_.empty()) sync_due_ = clock::now() + sync_interval_;
  dirty_.push_back(s.self_.lock());  // a job holds it now: never null
}

// Every listed spool synced (those a flush synced already are only unlisted); those whose sync
// failed, or whose head waits for its fdatasync, stay listed for a retry.
void spool_thread::sync_all(segment_log::head_durability head) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < dirty_.size(); ++i) {
    spool& s = *dirty_[i];
    if (s.dirty_ && (!s.sync_now(head) || s.dirty_)) {
      dirty_[kept++] = std::move(dirty_[i]);
      continue;
    }
    s.listed_ = false;
    dirty_[i].reset();
  }
  dirty_.resize(kept);
  if (kept > 0)
    sync_due_ = clock::now() + std::max<std::chrono::milliseconds>(sync_interval_, sync_retry);
}

}  // namespace gatewayd::consumers
