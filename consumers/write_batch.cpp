#include "consumers/write_batch.hpp"

#include <algorithm>

namespace gatewayd::consumers {

namespace {
std::atomic<std::size_t> batch_bytes{0};
}  // namespace

write_batch::~write_batch() {
  discard(std::nullopt);  // only when the gateway is going: nobody is told
  batch_bytes.fetch_sub(
      frames_.capacity() * sizeof(frame_slice) + buffers_.capacity() * sizeof(iovec),
      std::memory_order_relaxed);
}

std::size_t write_batch::slot_bytes_total() noexcept {
  return batch_bytes.load(std::memory_order_relaxed);
}

void write_batch::count_slots(std::size_t frames, std::size_t buffers) noexcept {
  const std::size_t was = frames * sizeof(frame_slice) + buffers * sizeof(iovec);
  const std::size_t now =
      frames_.capacity() * sizeof(frame_slice) + buffers_.capacity() * sizeof(iovec);
  if (now != was) {
    batch_bytes.fetch_add(now, std::memory_order_relaxed);
    batch_bytes.fetch_sub(was, std::memory_order_relaxed);
  }
}

frame_counts write_batch::fill(frame_queue& queue, std::uint64_t bytes) {
  reset();
  const std::size_t had = frames_.capacity();
  const frame_counts taken = queue.take(max_frames, std::min(bytes, max_bytes), frames_);
  count_slots(had, buffers_.capacity());
  bytes_ = taken.bytes;
  return taken;
}

std::span<const iovec> write_batch::unwritten() {
  const std::size_t had = buffers_.capacity();
  buffers_.clear();
  const frame_slice* prev = nullptr;
  for (std::size_t i = next_; i < frames_.size(); ++i) {
    const frame_slice& f = frames_[i];
    if (prev && prev->adjacent(f)) {
      buffers_.back().iov_len += f.size;
    } else {
      const std::size_t skip = i == next_ ? cut_ : 0;
      buffers_.push_back({const_cast<char*>(f.data()) + skip, f.size - skip});
    }
    prev = &f;
  }
  count_slots(frames_.capacity(), had);
  return buffers_;
}

template <class OnWhole>
write_batch::written_frames write_batch::pass_written(std::size_t n, OnWhole&& on_whole) {
  written_ += n;
  const std::uint64_t reached = n + cut_;  // bytes from the start of the first frame not whole
  std::uint64_t left = reached;
  // Locals, not members: on_whole's calls could change any member as far as the compiler
  // knows, and would make it reload them for every frame.
  const std::span<const frame_slice> all(frames_);
  const std::size_t first = next_;
  std::size_t i = first;
  while (i < all.size() && all[i].size <= left) {
    left -= all[i].size;
    on_whole(all[i]);
    ++i;
  }
  next_ = i;
  cut_ = static_cast<std::uint32_t>(left);
  return {all.subspan(first, i - first), reached - left};
}

write_batch::written_frames write_batch::take_written(std::size_t n) {
  return pass_written(n, [](const frame_slice&) {});
}

frame_counts write_batch::written(std::size_t n) {
  protocol::release_batch released(settled_count_);
  return pass_written(n, [&](const frame_slice& f) { released.delivered(f); }).counts();
}

frame_counts write_batch::return_to(frame_queue& queue) {
  const auto rest = std::span<const frame_slice>(frames_).subspan(next_);
  const frame_counts back = count(rest);
  queue.push_front_batch(rest);  // the references move with the frames
  next_ = frames_.size();
  reset();
  return back;
}

frame_counts write_batch::discard(protocol::give_up why) noexcept {
  const auto rest = std::span<const frame_slice>(frames_).subspan(next_);
  const frame_counts gone = count(rest);
  protocol::reject_slices(rest, why, settled_count_);
  next_ = frames_.size();
  reset();
  return gone;
}

void write_batch::compact(frame_packer& packer) {
  protocol::release_batch released;
  std::size_t run = next_;
  while (run < frames_.size()) {
    std::size_t end = run;
    std::uint64_t run_bytes = 0;
    while (end < frames_.size() && frames_[end].chunk == frames_[run].chunk)
      run_bytes += frames_[end++].size;
    if (frame_packer::sparse(run_bytes, frames_[run].chunk->capacity())) {
      for (std::size_t i = run; i < end; ++i) {
        const frame_slice copy = packer.pack(frames_[i]);
        released.add(frames_[i].chunk);
        frames_[i] = copy;
      }
    }
    run = end;
  }
}

void write_batch::reset() noexcept {
  frames_.clear();
  next_ = 0;
  bytes_ = 0;
  written_ = 0;
  cut_ = 0;
}

}  // namespace gatewayd::consumers
