#include <boost/test/unit_test.hpp>

#include <deque>
#include <random>
#include <vector>

#include "consumers/frame_queue.hpp"

using namespace gatewayd::consumers;
using gatewayd::protocol::frame_chunk;
namespace protocol = gatewayd::protocol;
using gatewayd::protocol::frame_slice;

namespace {

// Chunks of a non-standard size are freed, not cached, when their last reference goes, so
// frame_chunk::live_bytes() shows whether every reference was released exactly once: too few
// and the chunk outlives the test's own release, too many and it dies before it.
constexpr std::size_t odd_capacity = frame_chunk::standard_capacity + 64;

struct test_chunk {
  frame_chunk* chunk = frame_chunk::acquire(odd_capacity);  // the test's own reference
  std::uint32_t next_offset = 0;

  // A slice of `size` bytes carrying one reference for whoever stores it.
  frame_slice slice(std::uint32_t size) {
    chunk->add_refs(1);
    const frame_slice s{chunk, next_offset, size};
    next_offset += size;
    return s;
  }
};

struct live_check {
  std::size_t before = frame_chunk::live_bytes();
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(fifo_order_and_byte_accounting, live_check) {
  test_chunk c;
  {
    frame_queue q;
    std::uint64_t total = 0;
    for (std::uint32_t i = 1; i <= 100; ++i) {
      q.push_back(c.slice(i));
      total += i;
    }
    BOOST_TEST(q.size() == 100u);
    BOOST_TEST(q.bytes() == total);
    for (std::uint32_t i = 1; i <= 50; ++i) {
      BOOST_TEST(q.front().size == i);
      BOOST_TEST(q.drop_front(protocol::reject_reason::dropped) == i);
      total -= i;
    }
    BOOST_TEST(q.bytes() == total);
    const frame_slice f = q.pop_front();
    BOOST_TEST(f.size == 51u);
    f.chunk->release();
    BOOST_TEST(q.size() == 49u);
  }  // the destructor releases the rest
  BOOST_TEST(frame_chunk::live_bytes() == before + odd_capacity);  // ours is still held
  c.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before);
}

BOOST_AUTO_TEST_CASE(storage_grows_geometrically_and_stops_at_the_capacity) {
  test_chunk c;
  frame_queue q(40);
  BOOST_TEST(q.slots() == 0u);  // nothing allocated until used
  q.push_back(c.slice(1));
  BOOST_TEST(q.slots() == 16u);
  for (int i = 0; i < 16; ++i)
    q.push_back(c.slice(1));
  BOOST_TEST(q.slots() == 32u);
  for (int i = 0; i < 16; ++i)
    q.push_back(c.slice(1));
  BOOST_TEST(q.slots() == 40u);  // clamped to the capacity, not the next power of two
  for (int i = 0; i < 7; ++i)
    q.push_back(c.slice(1));
  BOOST_TEST(q.slots() == 40u);
  q.push_back(c.slice(1));  // past the capacity (backpressure): doubles again
  BOOST_TEST(q.slots() == 80u);
  BOOST_TEST(q.size() == 41u);
  q.clear(protocol::reject_reason::removed);
  BOOST_TEST(q.slots() == 0u);  // oversized storage goes back once empty
  c.chunk->release();

  frame_queue big(10000);
  test_chunk d;
  for (int i = 0; i < 5; ++i)
    big.push_back(d.slice(1));
  BOOST_TEST(big.slots() == 16u);  // a large capacity costs nothing until it is used
  big.clear(protocol::reject_reason::removed);
  BOOST_TEST(big.slots() == 16u);  // ordinary storage is kept: no reallocation when refilled
  d.chunk->release();
}

// Issue 42 item 6: the slots a queue holds follow what it holds. A ring grown past its capacity
// goes back to the capacity once trimmed to it; an emptied ring keeps up to its capacity (a
// queue that cycles does not reallocate); every slot is counted in slot_bytes_total().
BOOST_AUTO_TEST_CASE(slots_follow_what_the_queue_holds_and_are_counted) {
  const std::size_t before = frame_queue::slot_bytes_total();
  test_chunk c;
  {
    frame_queue q(40);
    for (int i = 0; i < 41; ++i)
      q.push_back(c.slice(1));
    BOOST_TEST(q.slots() == 80u);
    BOOST_TEST(frame_queue::slot_bytes_total() == before + 80 * sizeof(frame_slice));
    q.pop_front().chunk->release();  // trimmed to its capacity (admission's trim does this)
    q.fit_to_hint();
    BOOST_TEST(q.slots() == 40u);
    BOOST_TEST(q.size() == 40u);
    BOOST_TEST(frame_queue::slot_bytes_total() == before + 40 * sizeof(frame_slice));
    q.fit_to_hint();  // within its capacity already: nothing moves
    BOOST_TEST(q.slots() == 40u);
    q.clear(protocol::reject_reason::removed);
  }
  BOOST_TEST(frame_queue::slot_bytes_total() == before);
  {
    frame_queue big(10000);
    for (int i = 0; i < 5000; ++i)
      big.push_back(c.slice(1));
    BOOST_TEST(big.slots() >= 5000u);
    while (!big.empty())
      big.pop_front().chunk->release();
    const std::size_t kept = big.slots();
    BOOST_TEST(kept >= 5000u);  // within its capacity: kept
    BOOST_TEST(frame_queue::slot_bytes_total() == before + kept * sizeof(frame_slice));
    for (int i = 0; i < 1000; ++i)
      big.push_back(c.slice(1));
    BOOST_TEST(big.slots() == kept);  // refilled without reallocating
    big.clear(protocol::reject_reason::removed);
  }
  BOOST_TEST(frame_queue::slot_bytes_total() == before);
  c.chunk->release();
}

BOOST_FIXTURE_TEST_CASE(take_respects_limits_and_put_back_restores_order, live_check) {
  test_chunk c;
  frame_queue q;
  std::vector<frame_slice> all;
  // Wrap the ring: push 12, pop 10, push 14 more so the contents straddle the end.
  for (int i = 0; i < 12; ++i)
    q.push_back(c.slice(10));
  for (int i = 0; i < 10; ++i)
    q.drop_front(protocol::reject_reason::dropped);
  for (int i = 0; i < 14; ++i)
    q.push_back(c.slice(10));
  BOOST_TEST(q.slots() == 16u);
  BOOST_TEST(q.size() == 16u);
  const std::uint32_t first_offset = q.front().offset;

  std::vector<frame_slice> batch;
  auto moved = q.take(5, 1'000'000, batch);  // limited by frames
  BOOST_TEST(moved.frames == 5u);
  BOOST_TEST(moved.bytes == 50u);
  moved = q.take(100, 35, batch);  // limited by bytes: 3 frames of 10
  BOOST_TEST(moved.frames == 3u);
  BOOST_TEST(batch.size() == 8u);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    BOOST_TEST(batch[i].offset == first_offset + 10 * i);
  }
  BOOST_TEST(q.size() == 8u);
  BOOST_TEST(q.bytes() == 80u);

  // The unsent remainder (the last 6) goes back in front, in order.
  q.push_front_batch(std::span<const frame_slice>(batch).subspan(2));
  deliver_slices(std::span<const frame_slice>(batch).first(2));
  BOOST_TEST(q.size() == 14u);
  BOOST_TEST(q.bytes() == 140u);
  for (std::uint32_t i = 0; i < 14; ++i) {
    BOOST_TEST(q.front().offset == first_offset + 10 * (i + 2));
    q.drop_front(protocol::reject_reason::dropped);
  }
  BOOST_TEST(q.empty());

  // A first frame larger than max_bytes still makes a batch of one.
  q.push_back(c.slice(500));
  batch.clear();
  moved = q.take(10, 100, batch);
  BOOST_TEST(moved.frames == 1u);
  deliver_slices(batch);

  // Putting back more than the free room grows the ring and keeps the order.
  frame_queue r;
  std::vector<frame_slice> many;
  for (int i = 0; i < 40; ++i)
    many.push_back(c.slice(1));
  r.push_back(c.slice(7));
  r.push_front_batch(many);
  BOOST_TEST(r.size() == 41u);
  for (const auto& f : many) {
    BOOST_TEST(r.front().offset == f.offset);
    r.drop_front(protocol::reject_reason::dropped);
  }
  BOOST_TEST(r.front().size == 7u);
  r.clear(protocol::reject_reason::removed);
  c.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before);
}

BOOST_FIXTURE_TEST_CASE(references_are_released_exactly_once_in_runs, live_check) {
  test_chunk a;
  test_chunk b;
  const frame_counts cleared = [&] {
    frame_queue q;
    // Runs of one chunk interleaved with the other: each run is one release(k).
    for (int round = 0; round < 5; ++round) {
      for (int i = 0; i < 3; ++i)
        q.push_back(a.slice(4));
      for (int i = 0; i < 2; ++i)
        q.push_back(b.slice(4));
    }
    return q.clear(protocol::reject_reason::removed);
  }();
  BOOST_TEST(cleared.frames == 25u);
  BOOST_TEST(cleared.bytes == 100u);
  BOOST_TEST(frame_chunk::live_bytes() == before + 2 * odd_capacity);
  a.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before + odd_capacity);
  b.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before);

  // deliver_slices on its own, across chunks.
  test_chunk c;
  test_chunk d;
  std::vector<frame_slice> v{c.slice(1), c.slice(1), d.slice(1), c.slice(1), d.slice(1)};
  deliver_slices(v);
  c.chunk->release();
  d.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before);

  // release_batch flushes on destruction.
  test_chunk e;
  {
    gatewayd::protocol::release_batch batch;
    batch.add(e.slice(1).chunk);
    batch.add(e.slice(1).chunk);
  }
  e.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == before);
}

// pinned_bytes(): each run of neighbouring frames of one chunk counts the chunk once, through
// every way frames enter and leave the queue.
BOOST_AUTO_TEST_CASE(pinned_bytes_count_each_run_of_a_chunk_once) {
  live_check live;
  test_chunk a, b;
  {
    frame_queue q;
    q.push_back(a.slice(10));
    q.push_back(a.slice(10));
    BOOST_TEST(q.pinned_bytes() == odd_capacity);  // one run
    q.push_back(b.slice(10));
    q.push_back(a.slice(10));
    BOOST_TEST(q.pinned_bytes() == 3 * odd_capacity);  // a a | b | a
    std::vector<frame_slice> out;
    q.take(2, 1 << 20, out);  // the first run leaves whole
    BOOST_TEST(q.pinned_bytes() == 2 * odd_capacity);
    q.push_front_batch(out);  // and comes back in front
    BOOST_TEST(q.pinned_bytes() == 3 * odd_capacity);
    out.clear();
    q.take(1, 1 << 20, out);  // half a run: the rest still pins the chunk
    BOOST_TEST(q.pinned_bytes() == 3 * odd_capacity);
    deliver_slices(out);
    q.drop_front(protocol::reject_reason::dropped);
    BOOST_TEST(q.pinned_bytes() == 2 * odd_capacity);
    q.clear(protocol::reject_reason::removed);
    BOOST_TEST(q.pinned_bytes() == 0u);
  }
  a.chunk->release();
  b.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == live.before);
}

// Runs pushed at once (push_back_run, what an uncongested consumer takes) and batches taken
// (take) against a plain model of the queue, on a ring that wraps and grows: the order, the
// bytes, and the runs pinned_bytes() counts stay what the model says after every step.
BOOST_AUTO_TEST_CASE(runs_pushed_at_once_and_batches_taken_match_a_model_across_the_wrap) {
  live_check live;
  test_chunk a, b, c;
  test_chunk* const chunks[] = {&a, &b, &c};
  std::mt19937 rng(7);
  {
    frame_queue q(16);  // wraps within a few steps, and grows past 16 now and then
    std::deque<frame_slice> model;
    const auto model_pinned = [&] {
      std::uint64_t p = 0;
      for (std::size_t i = 0; i < model.size(); ++i)
        if (i == 0 || model[i].chunk != model[i - 1].chunk) p += odd_capacity;
      return p;
    };
    std::vector<frame_slice> out;
    for (int step = 0; step < 3000; ++step) {
      if (rng() % 2) {
        test_chunk& ch = *chunks[rng() % 3];
        std::vector<frame_slice> run(1 + rng() % 12);
        std::uint64_t bytes = 0;
        for (auto& f : run) {
          f = ch.slice(1 + rng() % 40);
          bytes += f.size;
        }
        q.push_back_run(run, bytes);
        model.insert(model.end(), run.begin(), run.end());
      } else {
        out.clear();
        const auto moved = q.take(1 + rng() % 20, 1 + rng() % 300, out);
        BOOST_REQUIRE(out.size() == moved.frames);
        BOOST_REQUIRE(model.size() >= out.size());
        std::uint64_t bytes = 0;
        for (const auto& f : out) {
          BOOST_REQUIRE((f.chunk == model.front().chunk && f.offset == model.front().offset));
          bytes += f.size;
          model.pop_front();
        }
        BOOST_REQUIRE(moved.bytes == bytes);
        deliver_slices(out);
      }
      BOOST_REQUIRE(q.size() == model.size());
      std::uint64_t bytes = 0;
      for (const auto& f : model)
        bytes += f.size;
      BOOST_REQUIRE(q.bytes() == bytes);
      BOOST_REQUIRE(q.pinned_bytes() == model_pinned());
    }
    BOOST_TEST(q.slots() > 16u);  // it did grow
  }
  for (test_chunk* ch : chunks)
    ch->chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == live.before);
}

// pop_back(): the newest frame leaves with its reference, the rest keeps its order, and the
// runs a chunk pins are counted as they were (a run's chunk leaves the count with its last frame).
BOOST_AUTO_TEST_CASE(pop_back_hands_over_the_newest_frame) {
  live_check live;
  test_chunk a, b;
  {
    frame_queue q;
    q.push_back(a.slice(10));
    q.push_back(b.slice(20));
    q.push_back(b.slice(30));
    BOOST_TEST(q.pinned_bytes() == 2 * odd_capacity);
    frame_slice f = q.pop_back();
    BOOST_TEST(f.size == 30u);
    BOOST_TEST(f.chunk == b.chunk);
    f.chunk->release();
    BOOST_TEST(q.size() == 2u);
    BOOST_TEST(q.bytes() == 30u);
    BOOST_TEST(q.pinned_bytes() == 2 * odd_capacity);  // b's run still has a frame
    f = q.pop_back();
    BOOST_TEST(f.size == 20u);
    f.chunk->release();
    BOOST_TEST(q.pinned_bytes() == odd_capacity);
    BOOST_TEST(q.front().size == 10u);
    // Around the ring's end: the newest frame sits at its start.
    for (std::uint32_t i = 0; i < 15; ++i)
      q.push_back(a.slice(1));
    for (int i = 0; i < 10; ++i)
      q.drop_front(protocol::reject_reason::dropped);
    for (std::uint32_t i = 0; i < 8; ++i)
      q.push_back(b.slice(2));
    BOOST_TEST(q.size() == 14u);
    for (int i = 0; i < 8; ++i) {
      f = q.pop_back();
      BOOST_TEST(f.size == 2u);
      f.chunk->release();
    }
    BOOST_TEST(q.size() == 6u);
    BOOST_TEST(q.bytes() == 6u);
    BOOST_TEST(q.pinned_bytes() == odd_capacity);
    while (!q.empty()) {
      f = q.pop_back();
      f.chunk->release();
    }
    BOOST_TEST(q.bytes() == 0u);
    BOOST_TEST(q.pinned_bytes() == 0u);
  }
  a.chunk->release();
  b.chunk->release();
  BOOST_TEST(frame_chunk::live_bytes() == live.before);
}

// compact(): sparse runs move into the packer's own chunks (freeing the read chunk), dense runs
// stay, and the order and the bytes do not change.
BOOST_AUTO_TEST_CASE(compact_moves_sparse_runs_out_of_their_read_chunks) {
  live_check live;
  test_chunk sparse, dense;
  {
    frame_packer packer;
    frame_queue q;
    q.push_back(sparse.slice(100));  // 100 bytes keep a 64 KiB chunk alive
    for (int i = 0; i < 20; ++i)
      q.push_back(dense.slice(1000));  // 20,000 bytes: more than an eighth of the chunk
    q.push_back(sparse.slice(100));
    sparse.chunk->release();  // only the queue holds it now
    sparse.chunk = nullptr;
    const auto bytes = q.bytes();
    const auto live_before_compact = frame_chunk::live_bytes();
    q.compact(packer);
    // The sparse read chunk is gone; one chunk of the packer's own holds its two frames.
    BOOST_TEST(frame_chunk::live_bytes() ==
               live_before_compact - odd_capacity + frame_chunk::standard_capacity);
    BOOST_TEST(q.bytes() == bytes);
    BOOST_TEST(q.size() == 22u);
    BOOST_TEST(q.front().chunk != dense.chunk);  // moved
    BOOST_TEST(q.front().bytes().size() == 100u);
    BOOST_TEST(q.pinned_bytes() < 3 * odd_capacity);  // the sparse chunk is no longer held
    const frame_slice first = q.pop_front();
    BOOST_TEST(q.front().chunk == dense.chunk);  // the dense run stayed where it was
    first.chunk->release();
    q.clear(protocol::reject_reason::removed);
  }
  dense.chunk->release();
}
