// The traffic library's sending side: pre-encoded frames, stamped per (sender, stream) in
// place, rotating over several addresses.
#include <boost/test/unit_test.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/frame_codec.hpp"
#include "tools/traffic/frame_batch.hpp"
#include "tools/traffic/payload_header.hpp"

using namespace gatewayd::traffic;
namespace protocol = gatewayd::protocol;

namespace {

struct sent_frame {
  std::string address;
  payload_header header;
  std::size_t payload_size;
};

// Every frame in `bytes` (which must hold whole frames only).
std::vector<sent_frame> frames_in(std::string_view bytes) {
  std::vector<sent_frame> out;
  while (!bytes.empty()) {
    const auto r = protocol::parse_frame(bytes, protocol::default_max_payload);
    BOOST_TEST_REQUIRE((r.state == protocol::parse_result::status::frame));
    out.push_back(
        {std::string(r.frame.address), *read_header(r.frame.payload), r.frame.payload.size()});
    bytes.remove_prefix(r.frame.bytes.size());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_address_numbers_every_frame_in_turn) {
  frame_batch b({"orders.eu"}, 40, 77, 8);
  BOOST_TEST(b.capacity() == 8u);
  const auto first = frames_in(b.next(8, 111));
  const auto second = frames_in(b.next(3, 222));
  BOOST_TEST_REQUIRE(first.size() == 8u);
  BOOST_TEST_REQUIRE(second.size() == 3u);
  for (std::size_t i = 0; i < 8; ++i) {
    BOOST_TEST(first[i].address == "orders.eu");
    BOOST_TEST(first[i].header.sequence == i);
    BOOST_TEST(first[i].header.stream == 0);
    BOOST_TEST(first[i].header.sender == 77);
    BOOST_TEST(first[i].header.send_ns == 111u);
    BOOST_TEST(first[i].payload_size == 40u);
  }
  BOOST_TEST(second[2].header.sequence == 10u);
  BOOST_TEST(second[2].header.send_ns == 222u);
  BOOST_TEST(b.stamped(0) == 11u);
}

BOOST_AUTO_TEST_CASE(mixed_addresses_rotate_and_are_numbered_per_stream_across_batches) {
  const std::vector<std::string> addresses = {"a", "bb.x", "c.long.address", "d"};
  frame_batch b(addresses, 16, 5, 10);
  std::vector<sent_frame> all;
  // Batch sizes that are not multiples of the address count: each batch continues the rotation.
  for (std::size_t n : {3, 10, 1, 7, 9}) {
    const auto got = frames_in(b.next(n, 1));
    BOOST_TEST(got.size() == n);
    all.insert(all.end(), got.begin(), got.end());
  }
  BOOST_TEST_REQUIRE(all.size() == 30u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    BOOST_TEST(all[i].address == addresses[i % 4], "frame " << i);
    BOOST_TEST(all[i].header.stream == i % 4);
    BOOST_TEST(all[i].header.sequence == i / 4);
  }
  BOOST_TEST(b.stamped(0) == 8u);  // frames 0, 4, ..., 28
  BOOST_TEST(b.stamped(3) == 7u);
  BOOST_TEST(b.stamped_total() == 30u);
}

// A sender's next connection is a sender of its own: a new id, every stream from 0 again,
// starting with the first address.
BOOST_AUTO_TEST_CASE(renumber_starts_a_new_sender_from_zero) {
  frame_batch b({"a", "b"}, 16, 5, 10);
  b.next(3, 1);
  b.renumber(6);
  const auto got = frames_in(b.next(3, 1));
  BOOST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[0].address == "a");
  BOOST_TEST(got[0].header.sender == 6u);
  BOOST_TEST(got[0].header.sequence == 0u);
  BOOST_TEST(got[1].header.sequence == 0u);
  BOOST_TEST(got[2].header.sequence == 1u);
  BOOST_TEST(b.sender() == 6u);
}

// --spread: one frame in memory per address, yet frame i carries number i mod spread; a resend
// (append_frame) carries the number of the frame it repeats.
BOOST_AUTO_TEST_CASE(spread_numbers_the_last_token_and_resends_keep_it) {
  frame_batch b({"t.x", "u"}, 16, 5, 4, 256 * 1024, 0, 3);
  std::vector<sent_frame> all;
  for (std::size_t n : {3, 4, 4, 2}) {
    const auto got = frames_in(b.next(n, 1));
    all.insert(all.end(), got.begin(), got.end());
  }
  BOOST_TEST_REQUIRE(all.size() == 13u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string number = "0000000" + std::to_string(i % 3);
    BOOST_TEST(all[i].address == (i % 2 ? "u." : "t.x.") + number, "frame " << i);
    BOOST_TEST(all[i].header.stream == i % 2);
    BOOST_TEST(all[i].header.sequence == i / 2);
  }
  std::string again;
  b.append_frame(again, b.header_of(7, 1));
  const auto resent = frames_in(again);
  BOOST_TEST_REQUIRE(resent.size() == 1u);
  BOOST_TEST(resent[0].address == "u.00000001");
  // Counted up digit by digit: the carries, and the wrap at the spread.
  frame_batch wide({"w"}, 16, 5, 64, 256 * 1024, 0, 12);
  const auto numbered = frames_in(wide.next(14, 1));
  BOOST_TEST_REQUIRE(numbered.size() == 14u);
  BOOST_TEST(numbered[9].address == "w.00000009");
  BOOST_TEST(numbered[10].address == "w.00000010");
  BOOST_TEST(numbered[11].address == "w.00000011");
  BOOST_TEST(numbered[12].address == "w.00000000");
  BOOST_CHECK_THROW(frame_batch({"x"}, 16, 1, 8, 1024, 0, frame_batch::max_spread + 1),
                    std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_batch_holds_about_max_bytes_and_at_least_one_frame) {
  BOOST_TEST(frame_batch({"x"}, 1000, 1, 4096, 64 * 1024).capacity() == 64u * 1024 / 1011);
  BOOST_TEST(frame_batch({"x"}, 100000, 1, 4096, 64 * 1024).capacity() == 1u);
  BOOST_TEST(frame_batch({"x"}, 16, 1, 32).capacity() == 32u);
  BOOST_CHECK_THROW(frame_batch({}, 16, 1), std::invalid_argument);
  BOOST_CHECK_THROW(frame_batch({"x"}, 15, 1), std::invalid_argument);
  BOOST_CHECK_THROW(frame_batch(std::vector<std::string>(257, "x"), 16, 1), std::invalid_argument);
}
