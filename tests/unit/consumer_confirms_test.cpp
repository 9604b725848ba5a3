// Every way a consumer gives up a queued CONFIRM frame settles its ledger entry exactly once,
// with the right reason: evictions and refusals by each overflow policy, a disconnect
// discarding, trimming at congestion, a cleared queue, a discarded write batch; a write hands
// its frames over unsettled for consumer_acks to deliver once acknowledged; packed copies carry the
// entry. Real ledgers, real chunks, no sockets.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "consumers/admission.hpp"
#include "consumers/consumer_stats.hpp"
#include "consumers/frame_packer.hpp"
#include "consumers/frame_queue.hpp"
#include "consumers/write_batch.hpp"
#include "protocol/confirm_ledger.hpp"

using namespace gatewayd::consumers;
namespace protocol = gatewayd::protocol;
using protocol::reject_reason;

namespace {

struct owner : protocol::confirm_owner {
  int told = 0;
  void confirms_settled() noexcept override { ++told; }
};

// A supplier connection's ledger and CONFIRM frames of one chunk, each owed by one consumer
// and owning one chunk reference, as the router hands them over.
struct confirm_frames {
  std::shared_ptr<owner> o = std::make_shared<owner>();
  protocol::confirm_ledger_ptr ledger = protocol::confirm_ledger::make(o, 10000);
  protocol::chunk_ptr chunk{protocol::frame_chunk::acquire()};
  std::uint32_t next = 0;

  std::vector<frame_slice> make(std::size_t n, std::uint32_t size = 100) {
    std::vector<frame_slice> out;
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back({chunk.get(), next, size, ledger->add(1)});
      next += size;
    }
    chunk->add_refs(static_cast<std::uint32_t>(n));
    return out;
  }
  // The settled prefix: its rejects by number, and the cumulative confirm (0: none yet).
  std::uint64_t settle(std::map<std::uint64_t, reject_reason>& rejects) {
    const auto c = ledger->advance(
        [&](std::uint64_t n, reject_reason why) { BOOST_TEST(rejects.emplace(n, why).second); });
    return c ? *c : ledger->confirmed();
  }
  std::uint32_t held_refs() const { return chunk->refs() - 1; }
};

std::map<std::uint64_t, reject_reason> all(std::uint64_t from, std::uint64_t to,
                                           reject_reason why) {
  std::map<std::uint64_t, reject_reason> m;
  for (std::uint64_t n = from; n <= to; ++n)
    m[n] = why;
  return m;
}

admission put(frame_queue& q, std::span<const frame_slice> f, const queue_limits& l) {
  protocol::release_batch refused;
  return admit(q, f, l, nullptr, true, nullptr, refused);
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_overflow_policy_rejects_what_it_drops_as_dropped) {
  for (const auto policy :
       {overflow_policy::drop_oldest, overflow_policy::drop_newest, overflow_policy::disconnect}) {
    confirm_frames f;
    frame_queue q;
    const queue_limits limits{3, 0, policy};
    put(q, f.make(5), limits);
    std::map<std::uint64_t, reject_reason> rejects;
    const std::uint64_t confirmed = f.settle(rejects);
    switch (policy) {
      case overflow_policy::drop_oldest:  // 1, 2 evicted; 3..5 queued
        BOOST_TEST(confirmed == 2u);
        BOOST_TEST((rejects == all(1, 2, reject_reason::dropped)));
        break;
      case overflow_policy::drop_newest:  // 4, 5 refused behind 1..3 still owed
        BOOST_TEST(confirmed == 0u);
        BOOST_TEST(rejects.empty());
        break;
      default:  // disconnect: 1..3 discarded at the 4th; 4 and 5 queue for the next connection
        BOOST_TEST(confirmed == 3u);
        BOOST_TEST((rejects == all(1, 3, reject_reason::dropped)));
        break;
    }
    // The rest goes with the consumer: removed, and nothing is settled twice.
    q.clear(reject_reason::removed);
    BOOST_TEST(f.settle(rejects) == 5u);
    BOOST_TEST(f.held_refs() == 0u);
    if (policy == overflow_policy::drop_newest) {
      auto expected = all(1, 3, reject_reason::removed);
      expected.merge(all(4, 5, reject_reason::dropped));
      BOOST_TEST((rejects == expected));
    }
  }
}

BOOST_AUTO_TEST_CASE(trimming_at_congestion_rejects_what_it_trims) {
  confirm_frames f;
  frame_queue q;
  protocol::release_batch none;
  // Kept up: everything queued past the limits, nothing dropped yet.
  admit(q, f.make(6), {100, 0, overflow_policy::drop_newest}, nullptr, false, nullptr, none);
  protocol::release_batch released;
  trim(q, {4, 0, overflow_policy::drop_newest}, nullptr, released);
  released.flush();
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 0u);  // 1..4 still owed
  q.clear(reject_reason::removed);
  BOOST_TEST(f.settle(rejects) == 6u);
  auto expected = all(1, 4, reject_reason::removed);
  expected.merge(all(5, 6, reject_reason::dropped));
  BOOST_TEST((rejects == expected));
}

BOOST_AUTO_TEST_CASE(a_write_hands_its_frames_over_and_a_discard_rejects_the_rest) {
  confirm_frames f;
  frame_queue q;
  put(q, f.make(5), {100, 0, overflow_policy::drop_oldest});
  write_batch batch;
  batch.fill(q);
  const auto done = batch.take_written(250);  // two whole frames, the third cut
  BOOST_TEST(done.slices.size() == 2u);
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 0u);    // handed over, not yet settled
  protocol::deliver_slices(done.slices);  // what consumer_acks::acknowledge() does
  BOOST_TEST(f.settle(rejects) == 2u);
  batch.discard(reject_reason::dropped);  // the disconnect policy fired during the write
  BOOST_TEST(f.settle(rejects) == 5u);
  BOOST_TEST((rejects == all(3, 5, reject_reason::dropped)));
  BOOST_TEST(f.held_refs() == 0u);
}

BOOST_AUTO_TEST_CASE(packed_copies_carry_the_entry_and_settle_it) {
  confirm_frames f;
  frame_queue q;
  put(q, f.make(3, 10), {100, 0, overflow_policy::drop_oldest});
  frame_packer packer;
  q.compact(packer);  // 30 bytes of a 64 KiB chunk: sparse, copied out
  BOOST_TEST(f.held_refs() == 0u);
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 0u);
  std::vector<frame_slice> out;
  q.take(10, 1 << 20, out);
  BOOST_TEST(out.size() == 3u);
  for (const auto& s : out)
    BOOST_TEST(s.confirm != nullptr);
  protocol::deliver_slices(out);
  BOOST_TEST(f.settle(rejects) == 3u);
  BOOST_TEST(rejects.empty());
}

BOOST_AUTO_TEST_CASE(
    a_frame_routed_to_two_consumers_is_settled_by_the_last_and_its_first_reason_stands) {
  confirm_frames f;
  protocol::confirm_entry* e = f.ledger->add(2);
  f.chunk->add_refs(2);
  const frame_slice s{f.chunk.get(), 0, 100, e};
  frame_queue a, b;
  a.push_back(s);
  b.push_back(s);
  a.drop_front(reject_reason::dropped);
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 0u);  // b still owes it
  b.clear(reject_reason::removed);
  BOOST_TEST(f.settle(rejects) == 1u);
  BOOST_TEST((rejects == all(1, 1, reject_reason::dropped)));
  BOOST_TEST(f.o->told == 1);
}

BOOST_AUTO_TEST_CASE(a_drop_tells_the_supplier_dropped_a_removal_removed_a_stop_nothing) {
  BOOST_TEST((reject_for(drop_reason::queue_full) == reject_reason::dropped));
  BOOST_TEST((reject_for(drop_reason::queue_bytes) == reject_reason::dropped));
  BOOST_TEST((reject_for(drop_reason::global_bytes) == reject_reason::dropped));
  BOOST_TEST((reject_for(drop_reason::slow_consumer) == reject_reason::dropped));
  BOOST_TEST((reject_for(drop_reason::removed) == reject_reason::removed));
  BOOST_TEST(!reject_for(drop_reason::shutdown).has_value());  // a stop never rejects
}

// What a consumer still holds when its drain ends: removed by a reload, each CONFIRM frame is
// rejected as removed (4); at a stop, queued or in a write batch, it is left unsettled: no
// reject, and no confirm ever covers it (its supplier resends it elsewhere). Either way the
// frames' references and the ledger go (LeakSanitizer checks).
BOOST_AUTO_TEST_CASE(a_removal_rejects_as_removed_and_a_stop_leaves_frames_unsettled) {
  {
    confirm_frames f;
    frame_queue q;
    for (const auto& s : f.make(3))
      q.push_back(s);
    q.clear(reject_for(drop_reason::removed));
    std::map<std::uint64_t, reject_reason> rejects;
    BOOST_TEST(f.settle(rejects) == 3u);
    BOOST_TEST((rejects == all(1, 3, reject_reason::removed)));
    BOOST_TEST(f.held_refs() == 0u);
  }
  confirm_frames f;
  frame_queue q;
  const auto first = f.make(2);    // 1, 2: delivered
  for (const auto& s : f.make(4))  // 3..6: queued at the stop
    q.push_back(s);
  protocol::deliver_slices(first);
  write_batch batch;
  batch.fill(q, 1u << 20);
  batch.written(2 * 100);               // 3, 4 written whole; 5, 6 not when the drain ends
  protocol::deliver_slices(f.make(2));  // 7, 8: delivered, after the frames left unsettled
  const frame_counts rest = batch.discard(reject_for(drop_reason::shutdown));
  BOOST_TEST(rest.frames == 2u);
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 4u);  // up to the first frame left unsettled
  for (const auto& s : f.make(1))       // 9: still queued
    q.push_back(s);
  const frame_counts left = q.clear(reject_for(drop_reason::shutdown));
  BOOST_TEST(left.frames == 1u);
  BOOST_TEST(f.settle(rejects) == 4u);  // never past 5, whatever settles after it
  BOOST_TEST(rejects.empty());
  BOOST_TEST(f.ledger->pending() == 5u);
  BOOST_TEST(f.held_refs() == 0u);
}

// Issue 42: what a consumer owes is its own. At its share of the confirm bound a dropping
// consumer refuses the CONFIRM frames of a batch (drop reason confirms_owed, the supplier told
// `reject` 1) and admits its plain frames as ever; the batch's CONFIRM frames are counted.
BOOST_AUTO_TEST_CASE(at_its_share_a_consumer_refuses_confirm_frames_and_takes_plain_ones) {
  confirm_frames f;
  auto frames = f.make(4);  // 1..4
  f.chunk->add_refs(2);
  frames.insert(frames.begin() + 1, frame_slice{f.chunk.get(), 9000, 100, nullptr});
  frames.push_back(frame_slice{f.chunk.get(), 9100, 100, nullptr});
  frame_queue q;
  std::atomic<std::uint64_t> settled{0};
  protocol::release_batch refused(&settled);
  const queue_limits limits{10000, 0, overflow_policy::drop_oldest};
  const admission a = admit(q, frames, limits, nullptr, false, nullptr, refused, 0);
  refused.flush();
  BOOST_TEST(a.confirms == 4u);
  BOOST_TEST(a.queued == 2u);  // the plain ones
  BOOST_TEST(a.drops[static_cast<std::size_t>(drop_reason::confirms_owed)] == 4u);
  BOOST_TEST(settled.load() == 4u);
  BOOST_TEST(to_string(drop_reason::confirms_owed) == "confirms_owed");
  BOOST_TEST((reject_for(drop_reason::confirms_owed) == reject_reason::dropped));
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 4u);
  BOOST_TEST((rejects == all(1, 4, reject_reason::dropped)));
  // Room for two more: the first two of a batch go in, the rest is refused, frame by frame.
  auto more = f.make(3);  // 5..7
  protocol::release_batch some(&settled);
  const admission b = admit(q, more, limits, nullptr, false, nullptr, some, 2);
  some.flush();
  BOOST_TEST(b.confirms == 3u);
  BOOST_TEST(b.queued == 2u);
  BOOST_TEST(settled.load() == 5u);
  // Below its share a batch goes in whole, in runs, and is counted all the same.
  auto last = f.make(3);
  protocol::release_batch none(&settled);
  const admission c = admit(q, last, limits, nullptr, false, nullptr, none, 3);
  BOOST_TEST(c.confirms == 3u);
  BOOST_TEST(c.queued == 3u);
  q.clear(std::nullopt);
}

// Every way a CONFIRM frame leaves a consumer counts it as settled by that consumer (the queue's
// drops and clear, a written batch, a discarded one, a release_batch of its own), plain frames
// not at all: taken minus settled is what it owes, and comes back to zero.
BOOST_AUTO_TEST_CASE(every_way_out_of_a_consumer_counts_what_it_settled) {
  confirm_frames f;
  std::atomic<std::uint64_t> settled{0};
  frame_queue q;
  q.count_settled_in(&settled);
  write_batch batch;
  batch.count_settled_in(&settled);
  for (const auto& s : f.make(10, 100))
    q.push_back(s);
  f.chunk->add_refs(1);
  q.push_back(frame_slice{f.chunk.get(), 5000, 100, nullptr});  // a plain one
  q.drop_front(reject_reason::dropped);                         // 1
  BOOST_TEST(settled.load() == 1u);
  batch.fill(q, 4 * 100);  // 2..5
  batch.written(3 * 100);  // 2..4 written whole
  BOOST_TEST(settled.load() == 4u);
  batch.discard(reject_reason::dropped);  // 5
  BOOST_TEST(settled.load() == 5u);
  q.clear(reject_reason::removed);  // 6..10 and the plain one
  BOOST_TEST(settled.load() == 10u);
  const auto last = f.make(2);
  protocol::deliver_slices(last, &settled);
  BOOST_TEST(settled.load() == 12u);
  std::map<std::uint64_t, reject_reason> rejects;
  BOOST_TEST(f.settle(rejects) == 12u);
}
