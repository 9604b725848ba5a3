// write_batch without a socket: neighbouring frames of a chunk coalesce into one iovec, a cut
// frame continues from its cut, and what the socket never took goes back whole.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "consumers/write_batch.hpp"

using namespace gatewayd::consumers;
using gatewayd::protocol::chunk_ptr;
using gatewayd::protocol::frame_chunk;

namespace {

// A queue holding `n` frames of `size` bytes: consecutive in one chunk, or, with `interleave`,
// alternating between two chunks (two suppliers' reads routed to one consumer).
struct queued_frames {
  chunk_ptr a{frame_chunk::acquire()};
  chunk_ptr b{frame_chunk::acquire()};
  frame_queue queue;

  queued_frames(std::size_t n, std::uint32_t size, bool interleave = false) {
    std::uint32_t at_a = 0, at_b = 0;
    for (std::size_t i = 0; i < n; ++i) {
      frame_chunk* c = interleave && i % 2 ? b.get() : a.get();
      std::uint32_t& at = c == a.get() ? at_a : at_b;
      c->add_refs(1);
      queue.push_back({c, at, size});
      at += size;
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(neighbours_of_one_chunk_are_one_iovec) {
  queued_frames q(10, 100);
  write_batch batch;
  const auto taken = batch.fill(q.queue);
  BOOST_TEST(taken.frames == 10u);
  BOOST_TEST(q.queue.empty());
  const auto iov = batch.unwritten();
  BOOST_REQUIRE(iov.size() == 1u);
  BOOST_TEST(iov[0].iov_len == 1000u);
  BOOST_TEST(iov[0].iov_base == q.a->data());

  queued_frames mixed(10, 100, true);
  write_batch other;
  other.fill(mixed.queue);
  BOOST_TEST(other.unwritten().size() == 10u);  // no two neighbours share a chunk
}

BOOST_AUTO_TEST_CASE(a_batch_stops_at_its_frame_and_byte_bounds) {
  queued_frames many(write_batch::max_frames + 5, 10);
  write_batch batch;
  BOOST_TEST(batch.fill(many.queue).frames == write_batch::max_frames);
  BOOST_TEST(many.queue.size() == 5u);

  queued_frames big(40, 60000);  // 2.4 MB: more than one batch's bytes
  write_batch b2;
  const auto taken = b2.fill(big.queue);
  BOOST_TEST(taken.bytes <= write_batch::max_bytes);
  BOOST_TEST(taken.frames == write_batch::max_bytes / 60000);
}

BOOST_AUTO_TEST_CASE(take_written_hands_over_whole_frames_and_continues_a_cut_one) {
  queued_frames q(5, 100);
  write_batch batch;
  batch.fill(q.queue);
  BOOST_TEST(q.a->refs() == 6u);  // ours + one per frame
  const auto done = batch.take_written(250);
  BOOST_TEST(done.slices.size() == 2u);
  BOOST_TEST(done.bytes == 200u);  // the third frame's 50 written bytes are not yet its own
  BOOST_TEST(q.a->refs() == 6u);   // handed over with their references, not released
  gatewayd::protocol::deliver_slices(done.slices);
  BOOST_TEST(q.a->refs() == 4u);
  const auto iov = batch.unwritten();
  BOOST_REQUIRE(iov.size() == 1u);
  BOOST_TEST(iov[0].iov_base == q.a->data() + 250);  // the third frame, from its cut
  BOOST_TEST(iov[0].iov_len == 250u);
  BOOST_TEST(batch.unwritten_bytes() == 250u);
  const auto cut = batch.written(50);  // the cut frame is complete now: delivered at once
  BOOST_TEST(cut.frames == 1u);
  BOOST_TEST(cut.bytes == 100u);
  const auto last = batch.written(200);
  BOOST_TEST(last.frames == 2u);
  BOOST_TEST(last.bytes == 200u);
  BOOST_TEST(batch.empty());
  BOOST_TEST(q.a->refs() == 1u);
}

BOOST_AUTO_TEST_CASE(a_broken_write_returns_the_cut_frame_whole_in_order) {
  queued_frames q(5, 100);
  write_batch batch;
  batch.fill(q.queue);
  q.a->add_refs(1);
  q.queue.push_back({q.a.get(), 500, 100});  // a later frame, queued while the write ran
  batch.written(150);                        // delivered at once
  const auto back = batch.return_to(q.queue);
  BOOST_TEST(back.frames == 4u);
  BOOST_TEST(back.bytes == 400u);
  BOOST_TEST(batch.empty());
  BOOST_REQUIRE(q.queue.size() == 5u);
  BOOST_TEST(q.queue.front().offset == 100u);  // the cut frame, from its first byte
  std::vector<std::uint32_t> offsets;
  while (!q.queue.empty())
    offsets.push_back(q.queue.pop_front().offset), q.a->release();
  BOOST_TEST(offsets == (std::vector<std::uint32_t>{100, 200, 300, 400, 500}),
             boost::test_tools::per_element());
  BOOST_TEST(q.a->refs() == 1u);
}

BOOST_AUTO_TEST_CASE(discard_and_destruction_release_what_was_not_written) {
  queued_frames q(5, 100);
  {
    write_batch batch;
    batch.fill(q.queue);
    batch.written(120);  // delivered at once
    const auto gone = batch.discard(gatewayd::protocol::reject_reason::dropped);
    BOOST_TEST(gone.frames == 4u);
    BOOST_TEST(gone.bytes == 400u);
    BOOST_TEST(q.a->refs() == 1u);
  }
  queued_frames r(3, 100);
  {
    write_batch batch;
    batch.fill(r.queue);
  }
  BOOST_TEST(r.a->refs() == 1u);
}
