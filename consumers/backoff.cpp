#include "consumers/backoff.hpp"

#include <algorithm>
#include <random>

namespace gatewayd::consumers {

namespace {
backoff::random_source default_random() {
  std::mt19937_64 engine{std::random_device{}()};
  return [engine]() mutable { return std::uniform_real_distribution<double>(0.0, 1.0)(engine); };
}
}  // namespace

backoff::backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                 random_source random)
    : initial_(std::max(initial, std::chrono::milliseconds(1))),
      max_(std::max(max, initial_)),
      ceiling_(initial_),
      random_(random ? std::move(random) : default_random()) {}

std::chrono::milliseconds backoff::next() {
  const auto ceiling = ceiling_.count();
  const auto floor = ceiling / 2;
  // Clamped: a source that returns exactly 1.0 must not push the delay past the ceiling.
  const double r = std::clamp(random_(), 0.0, 1.0);
  const auto delay = floor + static_cast<std::int64_t>(r * static_cast<double>(ceiling - floor));
  ceiling_ = std::min(ceiling_ * 2, max_);
  ++attempts_;
  return std::chrono::milliseconds(std::clamp<std::int64_t>(delay, 1, ceiling));
}

}  // namespace gatewayd::consumers
