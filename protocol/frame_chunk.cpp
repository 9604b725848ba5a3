#include "protocol/frame_chunk.hpp"

#include <cstdlib>
#include <new>

namespace gatewayd::protocol {

static_assert(sizeof(frame_chunk) == 64, "chunk header keeps the data cache-line aligned");

namespace {
std::atomic<std::size_t> live_bytes_total{0};
std::atomic<std::size_t> cached_bytes_total{0};
}  // namespace

// Chunks are released on whichever thread finishes with them last (usually a consumer's
// drain), so each thread keeps a few free standard chunks; the pool's threads take turns at
// both roles, which keeps the caches balanced without any shared lock.
struct chunk_cache {
  static constexpr std::size_t max_cached = 16;
  frame_chunk* head = nullptr;
  std::size_t count = 0;
  frame_chunk* parked = nullptr;  // see park_tail()
  std::size_t parked_end = 0;

  ~chunk_cache() {
    if (parked) parked->release();  // may recycle into this cache: freed just below
    while (head) {
      frame_chunk* c = head;
      head = c->next_free_;
      cached_bytes_total.fetch_sub(c->capacity_, std::memory_order_relaxed);
      destroy(c);
    }
  }
  static void destroy(frame_chunk* c) noexcept {
    live_bytes_total.fetch_sub(c->capacity_, std::memory_order_relaxed);
    c->~frame_chunk();
    ::operator delete (static_cast<void*>(c), std::align_val_t{64});
  }
};

namespace {
thread_local chunk_cache cache;
}

frame_chunk* frame_chunk::acquire(std::size_t min_capacity) {
  if (min_capacity <= standard_capacity) {
    if (frame_chunk* c = cache.head) {
      cache.head = c->next_free_;
      --cache.count;
      cached_bytes_total.fetch_sub(c->capacity_, std::memory_order_relaxed);
      c->next_free_ = nullptr;
      c->refs_.store(1, std::memory_order_relaxed);
      return c;
    }
    min_capacity = standard_capacity;
  }
  void* mem = ::operator new (sizeof(frame_chunk) + min_capacity, std::align_val_t{64});
  live_bytes_total.fetch_add(min_capacity, std::memory_order_relaxed);
  return new (mem) frame_chunk(min_capacity);
}

void frame_chunk::recycle(frame_chunk* c) noexcept {
  if (c->capacity_ == standard_capacity && cache.count < chunk_cache::max_cached) {
    c->next_free_ = cache.head;
    cache.head = c;
    ++cache.count;
    cached_bytes_total.fetch_add(c->capacity_, std::memory_order_relaxed);
    return;
  }
  chunk_cache::destroy(c);
}

void frame_chunk::park_tail(frame_chunk* c, std::size_t end) noexcept {
  frame_chunk* old = cache.parked;
  cache.parked = c;
  cache.parked_end = end;
  if (old) old->release();
}

frame_chunk* frame_chunk::take_tail(std::size_t min_free, std::size_t& end) noexcept {
  frame_chunk* c = cache.parked;
  if (c == nullptr || c->capacity_ - cache.parked_end < min_free) return nullptr;
  cache.parked = nullptr;
  end = cache.parked_end;
  return c;
}

std::size_t frame_chunk::live_bytes() noexcept {
  return live_bytes_total.load(std::memory_order_relaxed);
}

std::size_t frame_chunk::cached_bytes() noexcept {
  return cached_bytes_total.load(std::memory_order_relaxed);
}

}  // namespace gatewayd::protocol
