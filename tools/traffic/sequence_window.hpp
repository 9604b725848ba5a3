// One stream's order bookkeeping: the next sequence number it expects, and which of the last
// `window` numbers are still missing, so that a late frame is told apart from a duplicate.
#pragma once

#include <array>
#include <cstdint>

namespace gatewayd::traffic {

// What a verifier counts. Sequence numbers start at 0, so a stream whose first frame is
// number n lost the n before it (a receiver started after its sender counts them too).
struct traffic_counts {
  std::uint64_t frames = 0;      // every frame recorded, numbered or not
  std::uint64_t untimed = 0;     // payload shorter than the header: neither numbered nor timed
  std::uint64_t lost = 0;        // numbers skipped and not seen since (the gaps)
  std::uint64_t reordered = 0;   // a gap filled later
  std::uint64_t duplicated = 0;  // a number seen twice
  std::uint64_t late = 0;        // older than the window: late or duplicated, it cannot tell
  std::uint64_t corrupt = 0;     // byte streams that stopped being GWP/1 (counted by readers)
};

class sequence_window {
 public:
  static constexpr std::uint64_t window = 1024;

  void observe(std::uint64_t sequence, traffic_counts& counts) noexcept {
    if (sequence == next_) {  // the common case: one bit cleared, one increment
      mark(sequence, false);
      ++next_;
      return;
    }
    out_of_line(sequence, counts);
  }
  std::uint64_t next() const noexcept { return next_; }

 private:
  void out_of_line(std::uint64_t sequence, traffic_counts& counts) noexcept {
    if (sequence > next_) {
      const std::uint64_t gap = sequence - next_;
      counts.lost += gap;
      if (gap >= window) {
        missing_.fill(~std::uint64_t{0});
      } else {
        for (std::uint64_t s = next_; s < sequence; ++s)
          mark(s, true);
      }
      mark(sequence, false);
      next_ = sequence + 1;
    } else if (next_ - sequence > window) {
      ++counts.late;
    } else if (missing(sequence)) {
      mark(sequence, false);
      --counts.lost;
      ++counts.reordered;
    } else {
      ++counts.duplicated;
    }
  }
  // A ring over the numbers [next - window, next): bit s % window is set while s is missing.
  void mark(std::uint64_t s, bool is_missing) noexcept {
    auto& word = missing_[(s % window) / 64];
    const std::uint64_t bit = std::uint64_t{1} << (s % 64);
    word = is_missing ? word | bit : word & ~bit;
  }
  bool missing(std::uint64_t s) const noexcept {
    return (missing_[(s % window) / 64] >> (s % 64)) & 1u;
  }

  std::uint64_t next_ = 0;
  std::array<std::uint64_t, window / 64> missing_{};
};

}  // namespace gatewayd::traffic
