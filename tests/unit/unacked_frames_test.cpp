// The holding ring of an `ack = true` consumer (consumers/unacked_frames) and the reader of its
// acks (consumers/ack_reader), on real chunks and real encoded control frames.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "consumers/ack_reader.hpp"
#include "consumers/unacked_frames.hpp"
#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"

namespace gc = gatewayd::consumers;
namespace gp = gatewayd::protocol;

namespace {

// `n` slices of `size` bytes in one chunk, each owning a reference (the chunk's own is let go).
std::vector<gp::frame_slice> slices(gp::frame_chunk* chunk, std::uint32_t n, std::uint32_t size,
                                    std::uint32_t from = 0) {
  std::vector<gp::frame_slice> out;
  for (std::uint32_t i = 0; i < n; ++i)
    out.push_back({chunk, (from + i) * size, size});
  chunk->add_refs(n);
  return out;
}

std::string ack(std::uint64_t n) {
  std::string out;
  gp::append_control(out, {gp::control_message::kind::ack, n});
  return out;
}

// Feeds `bytes` to `r` in pieces of `step`, collecting acks; the first error stops.
gc::ack_error feed(gc::ack_reader& r, const std::string& bytes, std::size_t step,
                   std::vector<std::uint64_t>& acks) {
  for (std::size_t at = 0; at < bytes.size(); at += step) {
    const std::size_t n = std::min(step, bytes.size() - at);
    const auto room = r.free_space();
    BOOST_TEST_REQUIRE(room.size() >= n);
    std::copy_n(bytes.data() + at, n, room.data());
    const auto e = r.received(n, [&](std::uint64_t a) {
      acks.push_back(a);
      return true;
    });
    if (e != gc::ack_error::none) return e;
  }
  return gc::ack_error::none;
}

}  // namespace

BOOST_AUTO_TEST_CASE(holds_in_order_and_lets_go_from_the_front) {
  auto* chunk = gp::frame_chunk::acquire();
  {
    gc::unacked_frames held;
    const auto first = slices(chunk, 3, 100);
    held.push_back(first);
    const auto second = slices(chunk, 2, 100, 3);
    held.push_back(second);
    BOOST_TEST(held.size() == 5u);
    BOOST_TEST(held.bytes() == 500u);
    BOOST_TEST(chunk->refs() == 6u);  // its own and one per held frame: no copies

    const auto front = held.front(2);
    BOOST_TEST(front[0].offset == 0u);
    BOOST_TEST(front[1].offset == 100u);
    gp::deliver_slices(front);  // what consumer_acks::acknowledge() does
    BOOST_TEST(held.pop_front(2) == 200u);
    BOOST_TEST(held.size() == 3u);
    BOOST_TEST(held.bytes() == 300u);
    BOOST_TEST(held.all()[0].offset == 200u);
    BOOST_TEST(chunk->refs() == 4u);

    // Added after an acknowledged front: still one span in order.
    held.push_back(slices(chunk, 4, 100, 5));
    const auto all = held.all();
    BOOST_TEST_REQUIRE(all.size() == 7u);
    for (std::size_t i = 0; i < all.size(); ++i)
      BOOST_TEST(all[i].offset == (2 + i) * 100u);
  }
  // What was still held is let go with the ring.
  BOOST_TEST(chunk->refs() == 1u);
  chunk->release();
}

// Acks are checked against what was written on the connection: each covers the frames since
// the last one; one below it or above what was written is an error and covers nothing. A new
// connection counts from 1 again, and its first redelivery question is answered once.
BOOST_AUTO_TEST_CASE(acks_cover_what_was_written_on_the_connection) {
  auto* chunk = gp::frame_chunk::acquire();
  {
    gc::unacked_frames held;
    held.connection_up();
    BOOST_TEST(!held.redeliver_on(1));  // nothing held yet
    held.push_back(slices(chunk, 5, 100));
    std::size_t covered = 9;
    BOOST_TEST((held.acknowledge(6, covered) == gc::ack_error::ack_too_high));
    BOOST_TEST(covered == 0u);
    BOOST_TEST((held.acknowledge(3, covered) == gc::ack_error::none));
    BOOST_TEST(covered == 3u);
    gp::deliver_slices(held.front(covered));
    held.pop_front(covered);
    BOOST_TEST((held.acknowledge(2, covered) == gc::ack_error::ack_decreasing));
    BOOST_TEST((held.acknowledge(3, covered) == gc::ack_error::none));  // the same again
    BOOST_TEST(covered == 0u);
    // The connection fails with two held; the next one redelivers them, once.
    held.connection_up();
    BOOST_TEST(held.redeliver_on(2));
    BOOST_TEST(!held.redeliver_on(2));
    BOOST_TEST((held.acknowledge(1, covered) == gc::ack_error::ack_too_high));  // none written
  }
  BOOST_TEST(chunk->refs() == 1u);
  chunk->release();
}

BOOST_AUTO_TEST_CASE(acks_in_any_split) {
  const std::string bytes = ack(1) + ack(5) + ack(5) + ack(70000);
  // Reads shorter than two acks complete one at a time; one read of them all passes on its last.
  for (std::size_t step : {1u, 3u, 21u, 22u}) {
    gc::ack_reader r;
    std::vector<std::uint64_t> acks;
    BOOST_TEST_INFO("step " << step);
    BOOST_TEST((feed(r, bytes, step, acks) == gc::ack_error::none));
    BOOST_TEST((acks == std::vector<std::uint64_t>{1, 5, 5, 70000}));
  }
  gc::ack_reader r;
  std::vector<std::uint64_t> acks;
  BOOST_TEST((feed(r, bytes, 100, acks) == gc::ack_error::none));
  BOOST_TEST((acks == std::vector<std::uint64_t>{70000}));
}

// A consumer that floods acks costs one apply per read, not one per ack: every ack of a read is
// checked, the highest is passed on once. Before: 3,000 acks in a buffer were 3,000 applies (and
// a read held at most 13 of them).
BOOST_AUTO_TEST_CASE(one_apply_per_read_of_many_acks) {
  std::string bytes;
  for (std::uint64_t n = 1; n <= 3000; ++n)
    bytes += ack(n / 2);  // repeated and increasing: all valid
  gc::ack_reader r;
  BOOST_TEST_REQUIRE(r.free_space().size() >= bytes.size());
  std::vector<std::uint64_t> acks;
  BOOST_TEST((feed(r, bytes, bytes.size(), acks) == gc::ack_error::none));
  BOOST_TEST((acks == std::vector<std::uint64_t>{1500}));

  // Still checked one by one: a decreasing ack inside a read is an error; the highest ack before
  // it is passed on (as it would have been applied), nothing after it.
  gc::ack_reader d;
  acks.clear();
  BOOST_TEST(
      (feed(d, ack(3) + ack(9) + ack(4) + ack(20), 84, acks) == gc::ack_error::ack_decreasing));
  BOOST_TEST((acks == std::vector<std::uint64_t>{9}));
  // And across reads: the highest so far on this connection is the floor.
  gc::ack_reader x;
  acks.clear();
  BOOST_TEST((feed(x, ack(7) + ack(9), 42, acks) == gc::ack_error::none));
  BOOST_TEST((feed(x, ack(8) + ack(10), 42, acks) == gc::ack_error::ack_decreasing));
  BOOST_TEST((acks == std::vector<std::uint64_t>{9}));
  // reset() (a new connection) starts the count over.
  x.reset();
  BOOST_TEST((feed(x, ack(1), 21, acks) == gc::ack_error::none));
  BOOST_TEST((acks == std::vector<std::uint64_t>{9, 1}));
}

BOOST_AUTO_TEST_CASE(anything_but_an_ack_is_an_error) {
  std::string confirm, reject;
  gp::append_control(confirm, {gp::control_message::kind::confirm, 1});
  gp::append_control(reject, {gp::control_message::kind::reject, 1, gp::reject_reason::dropped});
  struct bad {
    std::string bytes;
    gc::ack_error error;
  };
  const std::vector<bad> cases = {
      {"garbage, not a frame", gc::ack_error::bad_frame},
      {gp::encode_frame("t.a", "data"), gc::ack_error::not_control},
      {gp::encode_frame("t.a", std::string(8, 'x'), gp::frame_flags::confirm),
       gc::ack_error::not_control},
      {confirm, gc::ack_error::not_ack},
      {reject, gc::ack_error::not_ack},
      {gp::encode_frame("ack", "1234567", gp::frame_flags::control), gc::ack_error::not_ack},
      {gp::encode_frame("hello", "12345678", gp::frame_flags::control), gc::ack_error::not_ack},
      // A long payload is refused from the header alone.
      {gp::encode_frame("ack", std::string(100000, 'x'), gp::frame_flags::control).substr(0, 12),
       gc::ack_error::bad_frame},
  };
  for (const auto& c : cases) {
    gc::ack_reader r;
    std::vector<std::uint64_t> acks;
    BOOST_TEST_INFO(c.bytes.substr(0, 20));
    // The ack before it still counts.
    BOOST_TEST((feed(r, ack(2) + c.bytes, 7, acks) == c.error));
    BOOST_TEST((acks == std::vector<std::uint64_t>{2}));
  }
}

// The caller hears once per read, whatever it answers: refusing the ack (too high) is its own
// protocol error to report.
BOOST_AUTO_TEST_CASE(the_caller_hears_once_per_read) {
  gc::ack_reader r;
  const std::string bytes = ack(1) + ack(2);
  std::copy(bytes.begin(), bytes.end(), r.free_space().data());
  std::vector<std::uint64_t> acks;
  const auto e = r.received(bytes.size(), [&](std::uint64_t a) {
    acks.push_back(a);
    return false;
  });
  BOOST_TEST((e == gc::ack_error::none));
  BOOST_TEST((acks == std::vector<std::uint64_t>{2}));
}
