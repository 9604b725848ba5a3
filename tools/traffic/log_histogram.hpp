// An HDR-style latency histogram: log2 buckets split into 32 linear sub-buckets (about 3%
// resolution from 64 ns to hours), fixed size, no allocation per sample.
#pragma once

#include <array>
#include <cstdint>

namespace gatewayd::traffic {

class log_histogram {
 public:
  static constexpr unsigned sub_bits = 5;
  static constexpr unsigned linear_limit = 1u << (sub_bits + 1);  // exact below this
  static constexpr std::size_t bucket_count = linear_limit + (64 - sub_bits - 1) * (1u << sub_bits);

  void record(std::uint64_t value) noexcept {
    ++buckets_[index_of(value)];
    ++count_;
    if (value > max_) max_ = value;
  }
  void merge(const log_histogram& other) noexcept;
  void reset() noexcept;

  std::uint64_t count() const noexcept { return count_; }
  std::uint64_t max() const noexcept { return max_; }
  // The value at quantile q (0..1): the upper edge of the bucket that holds it (never above max).
  std::uint64_t quantile(double q) const noexcept;

  static std::size_t index_of(std::uint64_t v) noexcept {
    if (v < linear_limit) return static_cast<std::size_t>(v);
    const unsigned e = 63u - static_cast<unsigned>(__builtin_clzll(v));  // >= sub_bits + 1
    const auto sub = static_cast<std::size_t>((v >> (e - sub_bits)) & ((1u << sub_bits) - 1));
    return linear_limit + (e - sub_bits - 1) * (1u << sub_bits) + sub;
  }
  static std::uint64_t upper_edge(std::size_t index) noexcept;

 private:
  std::array<std::uint64_t, bucket_count> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace gatewayd::traffic
