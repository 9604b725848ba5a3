// The traffic library's receiving side: the payload header's layout, and the verifier's
// counting of lost, reordered, duplicated and late frames per (lane, sender, stream).
#include <boost/test/unit_test.hpp>

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "tools/traffic/payload.hpp"
#include "tools/traffic/verifier.hpp"

using namespace gatewayd::traffic;

// Every allocation of this test program is counted, so a test can prove a path makes none.
// GCC 12 takes the replaced operators' malloc/free pairing for a mismatch (it is not one).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<std::size_t> allocations{0};
}
void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

// Records frame `sequence` of (sender, stream), untimed.
void feed(verifier& v, std::uint16_t sender, std::uint64_t sequence, std::uint8_t stream = 0,
          std::uint32_t lane = 0) {
  v.record(numbered_payload(sender, sequence, 16, stream), 0, lane);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_header_is_16_little_endian_bytes_that_round_trip) {
  char p[header_size];
  const payload_header h{0x0102030405060708u, max_sequence, 0xab, 0xcdef};
  store_header(p, h);
  BOOST_TEST(static_cast<unsigned char>(p[0]) == 0x08u);  // send time, lowest byte first
  BOOST_TEST(static_cast<unsigned char>(p[7]) == 0x01u);
  BOOST_TEST(static_cast<unsigned char>(p[12]) == 0xffu);  // the 40-bit sequence's top byte
  BOOST_TEST(static_cast<unsigned char>(p[13]) == 0xabu);  // stream
  BOOST_TEST(static_cast<unsigned char>(p[14]) == 0xefu);  // sender, low byte
  BOOST_TEST(static_cast<unsigned char>(p[15]) == 0xcdu);
  const auto back = load_header(p);
  BOOST_TEST(back.send_ns == h.send_ns);
  BOOST_TEST(back.sequence == max_sequence);
  BOOST_TEST(back.stream == 0xab);
  BOOST_TEST(back.sender == 0xcdef);
}

BOOST_AUTO_TEST_CASE(a_numbered_payload_reads_back_and_a_short_one_has_no_header) {
  const auto p = numbered_payload(7, 12345, 100, 3);
  BOOST_TEST(p.size() == 100u);
  const auto h = read_header(p);
  BOOST_TEST_REQUIRE(h.has_value());
  BOOST_TEST(h->sender == 7);
  BOOST_TEST(h->sequence == 12345u);
  BOOST_TEST(h->stream == 3);
  BOOST_TEST(h->send_ns == 0u);
  BOOST_TEST(p.substr(header_size, 10) == "hello from");
  BOOST_TEST(numbered_payload(1, 1, 2).size() == header_size);  // never below the header
  BOOST_TEST(!read_header(std::string(header_size - 1, 'x')).has_value());
  verifier v;
  v.record("short", 0);
  BOOST_TEST(v.counts().frames == 1u);
  BOOST_TEST(v.counts().untimed == 1u);
}

BOOST_AUTO_TEST_CASE(gaps_are_lost_until_filled_and_a_number_seen_twice_is_a_duplicate) {
  verifier v;
  for (std::uint64_t s : {0, 1, 2, 5, 6})
    feed(v, 1, s);
  BOOST_TEST(v.counts().lost == 2u);  // 3 and 4
  feed(v, 1, 4);                      // late, filling half the gap
  BOOST_TEST(v.counts().lost == 1u);
  BOOST_TEST(v.counts().reordered == 1u);
  feed(v, 1, 4);
  feed(v, 1, 6);
  BOOST_TEST(v.counts().duplicated == 2u);
  BOOST_TEST(v.counts().lost == 1u);
  BOOST_TEST(v.counts().frames == 8u);
}

BOOST_AUTO_TEST_CASE(numbers_start_at_zero_so_a_late_first_frame_counts_what_came_before) {
  verifier v;
  constexpr std::uint64_t first = 5000;
  static_assert(first > sequence_window::window);
  feed(v, 9, first);
  BOOST_TEST(v.counts().lost == first);
  // The window holds the `window` numbers before the next one expected (first + 1). Older: a
  // late frame or a duplicate, the verifier cannot tell which.
  feed(v, 9, first - sequence_window::window);
  BOOST_TEST(v.counts().late == 1u);
  feed(v, 9, first + 1 - sequence_window::window);  // just inside: a gap filled
  BOOST_TEST(v.counts().reordered == 1u);
  BOOST_TEST(v.counts().lost == first - 1);
}

BOOST_AUTO_TEST_CASE(mixed_addresses_are_checked_per_sender_and_stream) {
  // Two senders, each rotating over four addresses (frame i to stream i mod 4), interleaved.
  verifier v;
  for (std::uint64_t i = 0; i < 4000; ++i) {
    for (std::uint16_t sender : {1, 2}) {
      const auto stream = static_cast<std::uint8_t>(i % 4);
      if (sender == 2 && stream == 2 && i / 4 == 500) continue;  // one frame dropped
      feed(v, sender, i / 4, stream);
    }
  }
  BOOST_TEST(v.counts().lost == 1u);
  BOOST_TEST(v.counts().duplicated == 0u);
  BOOST_TEST(v.counts().reordered == 0u);
  BOOST_TEST(v.streams().size() == 8u);
  std::size_t seen = 0;
  v.streams().for_each([&](stream_key k, const sequence_window& w) {
    BOOST_TEST(w.next() == 1000u, k.sender << "/" << int(k.stream));
    ++seen;
  });
  BOOST_TEST(seen == 8u);
}

BOOST_AUTO_TEST_CASE(each_lane_is_a_copy_of_its_own) {
  // A receiver that is two consumers at once gets every frame twice, once per connection.
  verifier v;
  for (std::uint64_t s = 0; s < 100; ++s) {
    feed(v, 1, s, 0, 0);
    feed(v, 1, s, 0, 1);
  }
  BOOST_TEST(v.counts().duplicated == 0u);
  BOOST_TEST(v.counts().lost == 0u);
  BOOST_TEST(v.streams().size() == 2u);
}

BOOST_AUTO_TEST_CASE(latency_is_the_receive_time_minus_the_send_time) {
  verifier v;
  std::string p = numbered_payload(1, 0, 32);
  store_header(p.data(), payload_header{1'000'000, 0, 0, 1});
  v.record(p, 1'250'000);
  BOOST_TEST(v.latency().count() == 1u);
  BOOST_TEST(v.latency().max() == 250'000u);
  v.record(numbered_payload(1, 1), 2'000'000);  // no send time: ordered, not timed
  BOOST_TEST(v.latency().count() == 1u);
  v.reset_latency();
  BOOST_TEST(v.latency().count() == 0u);
}

BOOST_AUTO_TEST_CASE(known_streams_cost_no_allocation_and_little_time) {
  // Mixed traffic of 4 senders x 4 streams, numbered and timed as gateway-peer sends it.
  std::vector<std::string> payloads;
  for (std::uint16_t sender = 1; sender <= 4; ++sender)
    for (std::uint8_t stream = 0; stream < 4; ++stream)
      payloads.push_back(numbered_payload(sender, 0, 128, stream));
  verifier v;
  for (const auto& p : payloads)
    v.record(p, 1);  // each stream seen once: the table holds them all
  constexpr std::uint64_t rounds = 10'000'000 / 16;
  const std::size_t before = allocations.load();
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (std::uint64_t r = 1; r <= rounds; ++r) {
    for (auto& p : payloads) {
      auto h = load_header(p.data());
      h.send_ns = h.sequence = r;
      store_header(p.data(), h);
      v.record(p, r + 1000);
    }
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  BOOST_TEST(allocations.load() == before);
  BOOST_TEST(v.counts().lost == 0u);
  BOOST_TEST(v.counts().frames == 16 * (rounds + 1));
  const double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + double(t1.tv_nsec - t0.tv_nsec);
  const double per_frame = ns / double(16 * rounds);
  BOOST_TEST_MESSAGE("verifier: " << per_frame << " ns of CPU per frame (stamping included)");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(NDEBUG)
  BOOST_TEST(per_frame < 100.0);  // 10M frames/s on one core, with room to spare
#endif
}
