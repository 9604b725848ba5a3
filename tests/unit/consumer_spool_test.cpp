// The consumer's part of its spool against a real spool thread and files: a spill while some of
// the spool's copies are out (a write the socket may still take, frames awaiting their
// acknowledgement) delivers every record once, whether that write then succeeds or fails.
#include <boost/test/unit_test.hpp>

#include "consumers/consumer_spool.hpp"
#include "tests/support/segment_log_files.hpp"
#include "tests/support/spool_frames.hpp"

using namespace gatewayd::test::spool_frames;
using gatewayd::consumers::consumer_spool;
using gatewayd::test::segment_log_files::temp_dir;
using namespace std::chrono_literals;

namespace {

// What the consumer's strand does with one read: asks for it, and queues the copies.
std::vector<frame_slice> read_copies(consumer_spool& cs, reader& r) {
  if (!cs.read_if_due(1000)) return {};  // 10 frames of 100 bytes a read
  auto [got, generation] = r.next();
  BOOST_REQUIRE(cs.read_back(got, generation));
  return got;
}

// Written whole: consumed from the spool, references let go; their numbers.
std::vector<std::uint64_t> deliver(consumer_spool& cs, std::span<const frame_slice> frames) {
  std::vector<std::uint64_t> seqs;
  for (const auto& f : frames)
    seqs.push_back(seq_of(f));
  cs.delivered(frames);
  protocol::deliver_slices(frames);
  return seqs;
}

struct spooled {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  std::shared_ptr<reader> r = std::make_shared<reader>();
  spool_thread t{10s};
  consumer_spool cs;
  std::vector<std::uint64_t> seen;

  spooled() {
    cs.attach(open_spool(t, tmp.spool(), settled, r));
    cs.enter(consumer_spool::mode::spooling);
    cs.append(f.make(30, false));  // 0..29
  }
  // Reads and delivers what is left; then nothing is left on disk.
  void deliver_the_rest() {
    for (auto got = read_copies(cs, *r); !got.empty(); got = read_copies(cs, *r)) {
      const auto seqs = deliver(cs, got);
      seen.insert(seen.end(), seqs.begin(), seqs.end());
    }
    flushed(*cs.files());
    BOOST_TEST(cs.files()->stats().frames.load() == 0u);
    BOOST_TEST(cs.drained());
    BOOST_TEST(f.held_refs() == 0u);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(a_write_out_at_a_spill_that_then_succeeds_is_consumed_not_read_again,
                        spooled) {
  auto first = read_copies(cs, *r);   // 0..9
  auto second = read_copies(cs, *r);  // 10..19
  BOOST_REQUIRE(first.size() == 10u && second.size() == 10u);
  // A batch of 0..3 out; the socket took 0 and 1 whole, then was full.
  seen = deliver(cs, std::span(first).first(2));
  // Away, or behind: the queue (4..19) goes to the disk; 2 and 3 stay in the write.
  std::vector<frame_slice> held(first.begin() + 4, first.end());
  held.insert(held.end(), second.begin(), second.end());
  cs.spill(held);
  BOOST_TEST(held.empty());
  BOOST_TEST(cs.has_copies());  // 2 and 3, still out
  // The socket takes the rest of the write.
  const auto rest = deliver(cs, std::span(first).subspan(2, 2));
  seen.insert(seen.end(), rest.begin(), rest.end());
  deliver_the_rest();
  BOOST_TEST(seen == seq_range(0, 30));
}

BOOST_FIXTURE_TEST_CASE(a_write_out_at_a_spill_that_then_fails_is_read_again_once, spooled) {
  auto first = read_copies(cs, *r);  // 0..9
  BOOST_REQUIRE(first.size() == 10u);
  seen = deliver(cs, std::span(first).first(3));
  std::vector<frame_slice> held(first.begin() + 5, first.end());  // 3 and 4 out
  cs.spill(held);
  // Reading goes on after what is out.
  auto next = read_copies(cs, *r);
  BOOST_REQUIRE(!next.empty());
  BOOST_TEST(seq_of(next.front()) == 5u);
  // The write fails: 3 and 4 come back to the queue, in front of what was read since; the
  // link is down: all of it goes to the disk again, and nothing is out any more.
  held.assign(first.begin() + 3, first.begin() + 5);
  held.insert(held.end(), next.begin(), next.end());
  cs.spill(held);
  BOOST_TEST(!cs.has_copies());
  deliver_the_rest();
  BOOST_TEST(seen == seq_range(0, 30));
}

// A spill with nothing out: what was read and not delivered is read again (the old behaviour,
// kept).
BOOST_FIXTURE_TEST_CASE(a_spill_with_nothing_out_reads_every_undelivered_copy_again, spooled) {
  auto first = read_copies(cs, *r);
  seen = deliver(cs, std::span(first).first(4));
  std::vector<frame_slice> held(first.begin() + 4, first.end());
  cs.spill(held);
  BOOST_TEST(!cs.has_copies());
  deliver_the_rest();
  BOOST_TEST(seen == seq_range(0, 30));
}
