// Reference-counted read buffer: suppliers read into it, frames are slices of it, consumers
// share those slices (fan-out costs a reference, never a copy of the payload).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "protocol/confirm_ledger.hpp"

namespace gatewayd::protocol {

// Storage for many frames. Written only by the one session that owns the unwritten tail;
// the bytes of a frame are immutable once a slice of them has been handed out. Standard-size
// chunks are recycled through a small per-thread cache, so the steady state allocates nothing.
class frame_chunk {
 public:
  static constexpr std::size_t standard_capacity = 64 * 1024;

  // A chunk of at least `min_capacity` bytes with one reference, owned by the caller.
  static frame_chunk* acquire(std::size_t min_capacity = standard_capacity);

  void add_refs(std::uint32_t n) noexcept { refs_.fetch_add(n, std::memory_order_relaxed); }
  void release(std::uint32_t n = 1) noexcept {
    if (refs_.fetch_sub(n, std::memory_order_acq_rel) == n) recycle(this);
  }

  // References held right now (for tests and diagnostics: it may change at any moment).
  std::uint32_t refs() const noexcept { return refs_.load(std::memory_order_relaxed); }

  char* data() noexcept { return reinterpret_cast<char*>(this + 1); }
  const char* data() const noexcept { return reinterpret_cast<const char*>(this + 1); }
  std::size_t capacity() const noexcept { return capacity_; }

  // A session with no partial frame parks its chunk's unwritten tail here (taking over its
  // reference), and the next session that reads on this thread continues in it: slow
  // suppliers then pack their frames densely instead of pinning a mostly empty 64 KiB chunk
  // per read in every queue that holds one of their frames. One parked chunk per thread.
  static void park_tail(frame_chunk* c, std::size_t end) noexcept;
  // The parked chunk with its reference, and where its tail starts, if it has at least
  // `min_free` bytes free; nullptr otherwise.
  static frame_chunk* take_tail(std::size_t min_free, std::size_t& end) noexcept;

  // Bytes of chunks alive in this process (for tests and the memory budget), and of those the
  // bytes waiting in the per-thread free caches (alive, but holding no frame).
  static std::size_t live_bytes() noexcept;
  static std::size_t cached_bytes() noexcept;

  frame_chunk(const frame_chunk&) = delete;
  frame_chunk& operator=(const frame_chunk&) = delete;

 private:
  explicit frame_chunk(std::size_t capacity) noexcept : capacity_(capacity) {}
  ~frame_chunk() = default;
  static void recycle(frame_chunk* c) noexcept;
  friend struct chunk_cache;

  std::atomic<std::uint32_t> refs_{1};
  std::uint32_t capacity_;
  frame_chunk* next_free_ = nullptr;  // link in the per-thread cache
  char pad_[64 - sizeof(std::atomic<std::uint32_t>) - sizeof(std::uint32_t) - sizeof(void*)];
};

// One frame: a slice of a chunk. It does not own a reference by itself; whoever stores it
// (a consumer queue) owns exactly one reference for it and releases it when done. A CONFIRM
// frame's slices also point to its ledger entry: whoever gives a slice up settles the entry
// once for its consumer, delivered or rejected (release_batch below does both at once).
struct frame_slice {
  frame_chunk* chunk = nullptr;
  std::uint32_t offset = 0;
  std::uint32_t size = 0;
  confirm_entry* confirm = nullptr;  // null: a plain frame, nobody waits for it

  const char* data() const noexcept { return chunk->data() + offset; }
  std::string_view bytes() const noexcept { return {data(), size}; }
  // True when `next` starts where this one ends in the same chunk: one iovec can carry both.
  bool adjacent(const frame_slice& next) const noexcept {
    return next.chunk == chunk && next.offset == offset + size;
  }
};

// Owns one reference to a chunk (RAII for the session's own hold).
class chunk_ptr {
 public:
  chunk_ptr() = default;
  explicit chunk_ptr(frame_chunk* c) noexcept : c_(c) {}
  chunk_ptr(chunk_ptr&& o) noexcept : c_(o.c_) { o.c_ = nullptr; }
  chunk_ptr& operator=(chunk_ptr&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = o.c_;
      o.c_ = nullptr;
    }
    return *this;
  }
  chunk_ptr(const chunk_ptr&) = delete;
  chunk_ptr& operator=(const chunk_ptr&) = delete;
  ~chunk_ptr() { reset(); }

  void reset() noexcept {
    if (c_) c_->release();
    c_ = nullptr;
  }
  // Gives up ownership of the reference without releasing it.
  frame_chunk* detach() noexcept {
    frame_chunk* c = c_;
    c_ = nullptr;
    return c;
  }
  frame_chunk* get() const noexcept { return c_; }
  frame_chunk* operator->() const noexcept { return c_; }
  explicit operator bool() const noexcept { return c_ != nullptr; }

 private:
  frame_chunk* c_ = nullptr;
};

// Releases chunk references in runs: consecutive slices of one chunk (the common case, since a
// supplier's read chunk holds many frames in a row) cost one atomic operation, not one each.
// A slice given up for good goes through delivered() or rejected(): its reference and, for a
// CONFIRM frame, its consumer's settlement leave together, so neither can be forgotten. add()
// is for a reference alone (the frame lives on as a copy that carries the entry).
//
// `settled_count`, when given, is the counter of the consumer whose slices these are: the
// CONFIRM frames settled here are added to it at flush(), so that what a consumer owes (taken
// minus settled) is its own to count, without a step per plain frame.
class release_batch {
 public:
  explicit release_batch(std::atomic<std::uint64_t>* settled_count = nullptr) noexcept
      : settled_count_(settled_count) {}
  release_batch(const release_batch&) = delete;
  release_batch& operator=(const release_batch&) = delete;
  ~release_batch() { flush(); }

  void add(frame_chunk* chunk) noexcept {
    if (chunk != chunk_) {
      flush_refs();
      chunk_ = chunk;
    }
    ++count_;
  }
  // The consumer has the frame (handed whole to its socket, or acknowledged).
  void delivered(const frame_slice& s) noexcept {
    if (s.confirm) {
      settled_.delivered(*s.confirm);
      ++confirms_;
    }
    add(s.chunk);
  }
  // The consumer will never have it: dropped by its policy, or removed with it (`why`); or,
  // with no reason, the gateway stops and leaves it unsettled (its supplier resends it).
  void rejected(const frame_slice& s, give_up why) noexcept {
    if (s.confirm) {
      settled_.given_up(*s.confirm, why);
      ++confirms_;
    }
    add(s.chunk);
  }
  void flush() noexcept {
    flush_refs();
    settled_.flush();
    if (confirms_ && settled_count_)
      settled_count_->fetch_add(confirms_, std::memory_order_relaxed);
    confirms_ = 0;
  }

 private:
  void flush_refs() noexcept {
    if (chunk_) chunk_->release(count_);
    chunk_ = nullptr;
    count_ = 0;
  }

  frame_chunk* chunk_ = nullptr;
  std::uint32_t count_ = 0;
  confirm_settlements settled_;  // CONFIRM frames' entries, settled here by runs
  std::atomic<std::uint64_t>* const settled_count_;
  std::uint32_t confirms_ = 0;  // settled here, not yet added to settled_count_
};

// Gives back the one reference each slice owns, in runs, settling each as delivered.
inline void deliver_slices(std::span<const frame_slice> slices,
                           std::atomic<std::uint64_t>* settled_count = nullptr) noexcept {
  release_batch batch(settled_count);
  for (const auto& s : slices)
    batch.delivered(s);
}
// Gives back the one reference each slice owns, in runs, settling each as rejected for `why`
// (none: left unsettled).
inline void reject_slices(std::span<const frame_slice> slices, give_up why,
                          std::atomic<std::uint64_t>* settled_count = nullptr) noexcept {
  release_batch batch(settled_count);
  for (const auto& s : slices)
    batch.rejected(s, why);
}

}  // namespace gatewayd::protocol
