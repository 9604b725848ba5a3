// The overflow policies as the pure function admit(): no socket, no thread. Every frame put is
// either in the queue or refused (its reference released) and counted by reason.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "consumers/admission.hpp"

using namespace gatewayd::consumers;
using gatewayd::protocol::chunk_ptr;
using gatewayd::protocol::frame_chunk;
namespace protocol = gatewayd::protocol;
using gatewayd::protocol::release_batch;

namespace {

std::uint64_t drops(const admission& a, drop_reason r) {
  return a.drops[static_cast<std::size_t>(r)];
}

// Slices of one chunk, `size` bytes each, numbered by offset; each owns one reference, as the
// router hands them over. The fixture's own reference keeps the chunk alive for inspection.
struct frames {
  chunk_ptr chunk{frame_chunk::acquire()};
  std::uint32_t next = 0;

  std::vector<frame_slice> make(std::size_t n, std::uint32_t size = 100) {
    std::vector<frame_slice> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back({chunk.get(), next, size});
      next += size;
    }
    chunk->add_refs(static_cast<std::uint32_t>(n));
    return out;
  }
  // References held by the frames still queued: all but the fixture's own.
  std::uint32_t queued_refs() const { return chunk->refs() - 1; }
};

// As a consumer that stopped keeping up (its socket refused bytes) admits: the policy applies.
admission put(frame_queue& q, std::span<const frame_slice> f, const queue_limits& l,
              gatewayd::runtime::byte_budget* budget = nullptr) {
  release_batch refused;
  return admit(q, f, l, budget, true, nullptr, refused);
}

std::uint32_t front_offset(const frame_queue& q) {
  return q.front().offset;
}

}  // namespace

BOOST_AUTO_TEST_CASE(room_for_everything_queues_everything) {
  frames f;
  frame_queue q;
  const auto batch = f.make(10);
  const auto a = put(q, batch, {.capacity = 100});
  BOOST_TEST(a.queued == 10u);
  BOOST_TEST(q.size() == 10u);
  BOOST_TEST(q.bytes() == 1000u);
  for (const auto d : a.drops)
    BOOST_TEST(d == 0u);
  BOOST_TEST(f.queued_refs() == 10u);
}

BOOST_AUTO_TEST_CASE(drop_oldest_evicts_the_oldest_and_keeps_the_newest) {
  frames f;
  frame_queue q;
  const queue_limits l{.capacity = 4, .policy = overflow_policy::drop_oldest};
  put(q, f.make(4), l);
  const auto a = put(q, f.make(3), l);
  BOOST_TEST(a.queued == 3u);
  BOOST_TEST(drops(a, drop_reason::queue_full) == 3u);
  BOOST_TEST(q.size() == 4u);
  BOOST_TEST(front_offset(q) == 300u);  // frames 0..2 went, 3 is the oldest left
  BOOST_TEST(f.queued_refs() == 4u);    // the evicted frames' references were released
}

BOOST_AUTO_TEST_CASE(drop_oldest_with_a_byte_cap_evicts_for_bytes) {
  frames f;
  frame_queue q;
  const queue_limits l{.capacity = 100, .byte_cap = 450, .policy = overflow_policy::drop_oldest};
  put(q, f.make(4), l);
  const auto a = put(q, f.make(2), l);
  BOOST_TEST(drops(a, drop_reason::queue_bytes) == 2u);
  BOOST_TEST(q.bytes() <= 450u);
  BOOST_TEST(q.size() == 4u);
}

BOOST_AUTO_TEST_CASE(drop_newest_refuses_the_newcomers) {
  frames f;
  frame_queue q;
  const queue_limits l{.capacity = 4, .policy = overflow_policy::drop_newest};
  put(q, f.make(4), l);
  const auto a = put(q, f.make(3), l);
  BOOST_TEST(a.queued == 0u);
  BOOST_TEST(drops(a, drop_reason::queue_full) == 3u);
  BOOST_TEST(front_offset(q) == 0u);
  BOOST_TEST(f.queued_refs() == 4u);
}

BOOST_AUTO_TEST_CASE(disconnect_throws_the_backlog_away_and_keeps_the_newcomer) {
  frames f;
  frame_queue q;
  const queue_limits l{.capacity = 4, .policy = overflow_policy::disconnect};
  put(q, f.make(4), l);
  const auto a = put(q, f.make(1), l);
  BOOST_TEST(a.slow);
  BOOST_TEST(a.discarded == 4u);
  BOOST_TEST(drops(a, drop_reason::slow_consumer) == 4u);
  BOOST_TEST(a.queued == 1u);
  BOOST_TEST(q.size() == 1u);
  BOOST_TEST(front_offset(q) == 400u);
  BOOST_TEST(f.queued_refs() == 1u);
}

BOOST_AUTO_TEST_CASE(backpressure_never_drops_and_says_when_it_is_at_the_limit) {
  frames f;
  frame_queue q;
  const queue_limits l{.capacity = 4, .policy = overflow_policy::backpressure};
  const auto a = put(q, f.make(6), l);
  BOOST_TEST(a.queued == 6u);
  for (const auto d : a.drops)
    BOOST_TEST(d == 0u);
  BOOST_TEST(at_limit(q, l));
  BOOST_TEST(!at_limit(q, {.capacity = 7}));
  BOOST_TEST(at_limit(q, {.capacity = 7, .byte_cap = 600}));
}

BOOST_AUTO_TEST_CASE(frames_that_can_never_fit_are_refused_by_every_dropping_policy) {
  for (const auto policy :
       {overflow_policy::drop_oldest, overflow_policy::drop_newest, overflow_policy::disconnect}) {
    BOOST_TEST_CONTEXT("policy " << to_string(policy)) {
      frames f;
      frame_queue q;
      const auto zero = put(q, f.make(2), {.capacity = 0, .policy = policy});
      BOOST_TEST(zero.queued == 0u);
      BOOST_TEST(drops(zero, drop_reason::queue_full) == 2u);
      const auto huge = put(q, f.make(1, 500), {.capacity = 10, .byte_cap = 400, .policy = policy});
      BOOST_TEST(huge.queued == 0u);
      BOOST_TEST(drops(huge, drop_reason::queue_bytes) == 1u);
      BOOST_TEST(q.empty());
      BOOST_TEST(f.queued_refs() == 0u);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_global_budget_holds_queued_bytes_and_refuses_past_its_cap) {
  gatewayd::runtime::byte_budget budget(1000);
  frames f;
  frame_queue q;
  const queue_limits newest{.capacity = 100, .policy = overflow_policy::drop_newest};
  // The whole batch fits: one reservation for it.
  put(q, f.make(8), newest, &budget);
  BOOST_TEST(budget.used() == 800u);
  // This batch does not fit whole: frame by frame, the first two fit, the rest is refused.
  const auto a = put(q, f.make(4), newest, &budget);
  BOOST_TEST(a.queued == 2u);
  BOOST_TEST(drops(a, drop_reason::global_bytes) == 2u);
  BOOST_TEST(budget.used() == 1000u);

  // drop-oldest makes room for the newest by evicting, counted as global_bytes.
  frame_queue other;
  const queue_limits oldest{.capacity = 100, .policy = overflow_policy::drop_oldest};
  budget.give_back(q.clear(protocol::reject_reason::removed).bytes);
  put(other, f.make(10), oldest, &budget);
  const auto b = put(other, f.make(2), oldest, &budget);
  BOOST_TEST(b.queued == 2u);
  BOOST_TEST(drops(b, drop_reason::global_bytes) == 2u);
  BOOST_TEST(budget.used() == 1000u);
  BOOST_TEST(other.bytes() == 1000u);

  // backpressure queues past the budget and says so.
  frame_queue third;
  const auto c = put(third, f.make(1), {.policy = overflow_policy::backpressure}, &budget);
  BOOST_TEST(c.queued == 1u);
  BOOST_TEST(c.over_budget);
  BOOST_TEST(budget.used() == 1100u);
  budget.give_back(other.clear(protocol::reject_reason::removed).bytes +
                   third.clear(protocol::reject_reason::removed).bytes);
  BOOST_TEST(budget.used() == 0u);
}

BOOST_AUTO_TEST_CASE(a_consumer_that_keeps_up_loses_nothing_whatever_its_policy) {
  for (const auto policy : {overflow_policy::drop_oldest, overflow_policy::drop_newest,
                            overflow_policy::disconnect, overflow_policy::backpressure}) {
    BOOST_TEST_CONTEXT("policy " << to_string(policy)) {
      gatewayd::runtime::byte_budget budget(500);
      frames f;
      frame_queue q;
      const queue_limits l{.capacity = 4, .byte_cap = 300, .policy = policy};
      release_batch refused;
      // Past the frame limit, the byte cap and the global budget: the gateway is behind, not
      // the consumer, so all of it queues (the caller pauses the suppliers instead).
      const auto a = admit(q, f.make(8), l, &budget, false, nullptr, refused);
      BOOST_TEST(a.queued == 8u);
      for (const auto d : a.drops)
        BOOST_TEST(d == 0u);
      BOOST_TEST(!a.slow);
      BOOST_TEST(a.over_budget);
      BOOST_TEST(budget.used() == 800u);
      BOOST_TEST(above_high_water(q, l));
      budget.give_back(q.clear(protocol::reject_reason::removed).bytes);
    }
  }
}

BOOST_AUTO_TEST_CASE(high_and_low_water_stay_within_half_the_limits) {
  frames f;
  frame_queue q;
  // Large limits: a few batches' worth (4,096 frames or 4 MiB) is the high-water mark.
  const queue_limits big{.capacity = 1000000};
  for (int i = 0; i < 40; ++i)
    put(q, f.make(100, 10), big);
  BOOST_TEST(!above_high_water(q, big));
  BOOST_TEST(!below_low_water(q, big));  // 4,000 frames: above the low mark of 2,048
  put(q, f.make(96, 10), big);
  BOOST_TEST(above_high_water(q, big));
  // Small limits: half the capacity, half the byte cap.
  frame_queue small;
  const queue_limits tight{.capacity = 10, .byte_cap = 10000};
  put(small, f.make(4), tight);
  BOOST_TEST(!above_high_water(small, tight));
  BOOST_TEST(!below_low_water(small, tight));
  put(small, f.make(1), tight);
  BOOST_TEST(above_high_water(small, tight));
  for (int i = 0; i < 3; ++i)
    small.drop_front(protocol::reject_reason::dropped);
  BOOST_TEST(!below_low_water(small, tight));  // 2 frames: the low mark is half of 5
  small.drop_front(protocol::reject_reason::dropped);
  BOOST_TEST(below_low_water(small, tight));
  const queue_limits bytes{.capacity = 100, .byte_cap = 600};
  frame_queue by_bytes;
  put(by_bytes, f.make(3), bytes);
  BOOST_TEST(above_high_water(by_bytes, bytes));  // 300 bytes: half the byte cap
}

BOOST_AUTO_TEST_CASE(a_congested_consumer_copies_only_sparse_runs_out_of_their_chunks) {
  frame_packer packer;
  frames sparse, dense;
  frame_queue q;
  release_batch refused;
  const queue_limits l{.capacity = 1000};
  // One 100-byte frame of a 64 KiB chunk: copied, and the chunk's reference given back.
  admit(q, sparse.make(1), l, nullptr, true, &packer, refused);
  refused.flush();
  BOOST_TEST(sparse.queued_refs() == 0u);
  BOOST_TEST(q.front().chunk != sparse.chunk.get());
  // 100 frames of 200 bytes (20,000 of 65,536): queued as they are.
  admit(q, dense.make(100, 200), l, nullptr, true, &packer, refused);
  refused.flush();
  BOOST_TEST(dense.queued_refs() == 100u);
  BOOST_TEST(q.size() == 101u);
  BOOST_TEST(q.bytes() == 20100u);
}

// trim(): what a consumer queued while it kept up (everything, past its limits) meets its policy
// the moment it becomes congested. 8 frames of 100 bytes queued against a capacity of 6 and a
// byte cap of 450: 2 frames over the capacity (queue_full), then 2 more over the bytes.
namespace {

struct held_queue {
  gatewayd::runtime::byte_budget budget{100000};
  frames f;
  frame_queue q;

  // Queued as a consumer that keeps up queues: all of it, past the limits.
  explicit held_queue(const queue_limits& l, std::size_t n = 8) {
    release_batch refused;
    admit(q, f.make(n), l, &budget, false, nullptr, refused);
  }
  admission trim_it(const queue_limits& l) {
    release_batch released;
    return trim(q, l, &budget, released);
  }
  // The offsets of the queued frames, oldest first (the queue is left as it was).
  std::vector<std::uint32_t> offsets() {
    std::vector<frame_slice> out;
    q.take(q.size(), ~std::uint64_t{0}, out);
    q.push_front_batch(out);
    std::vector<std::uint32_t> o;
    for (const auto& s : out)
      o.push_back(s.offset);
    return o;
  }
  ~held_queue() { budget.give_back(q.clear(protocol::reject_reason::removed).bytes); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(trim_drop_oldest_keeps_the_newest_within_both_limits) {
  const queue_limits l{.capacity = 6, .byte_cap = 450, .policy = overflow_policy::drop_oldest};
  held_queue h(l);
  BOOST_TEST(h.q.size() == 8u);
  const auto a = h.trim_it(l);
  BOOST_TEST(drops(a, drop_reason::queue_full) == 2u);
  BOOST_TEST(drops(a, drop_reason::queue_bytes) == 2u);
  BOOST_TEST(!a.slow);
  BOOST_TEST(h.q.size() == 4u);
  BOOST_TEST(h.q.bytes() == 400u);
  BOOST_TEST((h.offsets() == std::vector<std::uint32_t>{400, 500, 600, 700}));
  BOOST_TEST(h.f.queued_refs() == 4u);         // the dropped frames' references went
  BOOST_TEST(h.budget.used() == h.q.bytes());  // and their bytes left the global budget
}

BOOST_AUTO_TEST_CASE(trim_drop_newest_keeps_the_oldest_within_both_limits) {
  const queue_limits l{.capacity = 6, .byte_cap = 450, .policy = overflow_policy::drop_newest};
  held_queue h(l);
  const auto a = h.trim_it(l);
  BOOST_TEST(drops(a, drop_reason::queue_full) == 2u);
  BOOST_TEST(drops(a, drop_reason::queue_bytes) == 2u);
  BOOST_TEST((h.offsets() == std::vector<std::uint32_t>{0, 100, 200, 300}));
  BOOST_TEST(h.f.queued_refs() == 4u);
  BOOST_TEST(h.budget.used() == 400u);
}

BOOST_AUTO_TEST_CASE(trim_disconnect_discards_a_backlog_over_its_limits) {
  const queue_limits l{.capacity = 6, .policy = overflow_policy::disconnect};
  held_queue h(l);
  const auto a = h.trim_it(l);
  BOOST_TEST(a.slow);
  BOOST_TEST(a.discarded == 8u);
  BOOST_TEST(drops(a, drop_reason::slow_consumer) == 8u);
  BOOST_TEST(h.q.empty());
  BOOST_TEST(h.f.queued_refs() == 0u);
  BOOST_TEST(h.budget.used() == 0u);
  // Over the byte cap alone is over its limits too.
  const queue_limits bytes{.capacity = 100, .byte_cap = 700, .policy = overflow_policy::disconnect};
  held_queue by_bytes(bytes);
  BOOST_TEST(by_bytes.trim_it(bytes).slow);
  BOOST_TEST(by_bytes.q.empty());
}

BOOST_AUTO_TEST_CASE(trim_backpressure_keeps_what_it_holds) {
  const queue_limits l{.capacity = 6, .byte_cap = 450, .policy = overflow_policy::backpressure};
  held_queue h(l);
  const auto a = h.trim_it(l);
  for (const auto d : a.drops)
    BOOST_TEST(d == 0u);
  BOOST_TEST(!a.slow);
  BOOST_TEST(h.q.size() == 8u);
  BOOST_TEST(h.budget.used() == 800u);
}

BOOST_AUTO_TEST_CASE(trim_leaves_a_queue_within_its_limits_alone) {
  for (const auto policy : {overflow_policy::drop_oldest, overflow_policy::drop_newest,
                            overflow_policy::disconnect, overflow_policy::backpressure}) {
    BOOST_TEST_CONTEXT("policy " << to_string(policy)) {
      // Exactly at both limits: full, not over.
      const queue_limits l{.capacity = 8, .byte_cap = 800, .policy = policy};
      held_queue h(l);
      const auto a = h.trim_it(l);
      for (const auto d : a.drops)
        BOOST_TEST(d == 0u);
      BOOST_TEST(!a.slow);
      BOOST_TEST(h.q.size() == 8u);
      BOOST_TEST(h.f.queued_refs() == 8u);
    }
  }
}

BOOST_AUTO_TEST_CASE(enum_names_round_trip) {
  for (std::size_t i = 0; i < drop_reason_count; ++i) {
    const auto r = static_cast<drop_reason>(i);
    BOOST_TEST((drop_reason_names.parse(to_string(r)).value() == r));
  }
  BOOST_TEST(to_string(drop_reason::global_bytes) == "global_bytes");
  BOOST_TEST(overflow_policy_names.choices() ==
             "drop-oldest, drop-newest, disconnect or backpressure");
  BOOST_TEST(!overflow_policy_names.parse("drop_oldest").has_value());
}
