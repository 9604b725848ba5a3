#include "tools/traffic/log_histogram.hpp"

#include <algorithm>
#include <cmath>

namespace gatewayd::traffic {

void log_histogram::merge(const log_histogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i)
    buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

void log_histogram::reset() noexcept {
  buckets_.fill(0);
  count_ = 0;
  max_ = 0;
}

std::uint64_t log_histogram::upper_edge(std::size_t index) noexcept {
  if (index < linear_limit) return index;
  const std::size_t k = index - linear_limit;
  const unsigned e = static_cast<unsigned>(k >> sub_bits) + sub_bits + 1;
  const std::uint64_t sub = k & ((1u << sub_bits) - 1);
  const std::uint64_t lower = ((std::uint64_t{1} << sub_bits) | sub) << (e - sub_bits);
  return lower + (std::uint64_t{1} << (e - sub_bits)) - 1;
}

std::uint64_t log_histogram::quantile(double q) const noexcept {
  if (count_ == 0) return 0;
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(upper_edge(i), max_);
  }
  return max_;
}

}  // namespace gatewayd::traffic
