// The consumer's end: its table, and the deadline that bounds its drain.
#include "consumers/consumer_closing.hpp"

#include <cassert>

namespace gatewayd::consumers {

consumer_closing::consumer_closing(const runtime::strand& strand, closing_owner& owner)
    : timer_(strand), owner_(owner) {}

// The table in consumer_closing.hpp.
bool consumer_closing::may_enter(life from, life to) noexcept {
  switch (from) {
    case life::open:
      return to == life::draining;
    case life::draining:
      return to == life::closed;
    case life::closed:
      return to == life::done;
    case life::done:
      return false;
  }
  return false;
}

// The one place its end moves: anything the table does not hold is a bug.
void consumer_closing::enter(life next) noexcept {
  assert(may_enter(life_, next));
  life_ = next;
}

void consumer_closing::begin(drop_reason why) noexcept {
  if (life_ != life::open) return;
  enter(life::draining);
  ending_ = why;
}

void consumer_closing::arm(std::chrono::milliseconds timeout,
                           std::function<void(std::uint64_t)> done) {
  if (done) done_.push_back(std::move(done));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (armed_ && deadline >= deadline_) return;
  armed_ = true;
  deadline_ = deadline;
  timer_.expires_at(deadline);
  timer_.async_wait([self = owner_.keep_alive(), this](std::error_code ec) {
    // Cancelled: re-armed for an earlier deadline, or the drain already finished.
    if (!ec) owner_.end_drain();
  });
}

void consumer_closing::report(std::uint64_t undelivered) {
  auto done = std::move(done_);
  done_.clear();
  for (auto& d : done)
    d(undelivered);
}

}  // namespace gatewayd::consumers
