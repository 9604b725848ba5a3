#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "protocol/address.hpp"
#include "protocol/frame_stream.hpp"

using namespace gatewayd::protocol;

namespace {

struct received {
  std::string address;
  std::string bytes;
  std::uint8_t flags = 0;
};

// Feeds `stream` the bytes in pieces of the given sizes; collects frames and the first error.
struct feeder {
  frame_stream stream;
  std::vector<received> frames;
  std::vector<chunk_ptr> held;  // keeps chunks alive like a consumer queue would
  frame_stream::stream_error error;

  explicit feeder(std::uint32_t max_payload = default_max_payload, flag_policy accept = data_frames)
      : stream(max_payload, nullptr, accept) {}

  bool feed(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto buf = stream.prepare();
      BOOST_TEST_REQUIRE(buf.size >= std::min<std::size_t>(bytes.size(), 1));
      const std::size_t n = std::min(buf.size, bytes.size());
      std::memcpy(buf.data, bytes.data(), n);
      stream.commit(n);
      bytes.remove_prefix(n);
      error = stream.parse([&](const frame_view& f, const frame_slice& s) {
        BOOST_TEST(s.bytes() == f.bytes);
        s.chunk->add_refs(1);
        held.emplace_back(s.chunk);
        frames.push_back({std::string(f.address), std::string(f.bytes), f.flags});
      });
      if (error) return false;
    }
    return true;
  }
};

std::string many_frames(int n, std::vector<std::string>* each = nullptr) {
  std::string all;
  for (int i = 0; i < n; ++i) {
    const std::string f =
        encode_frame("t." + std::to_string(i % 7), std::string(i % 300, 'a' + i % 26));
    if (each) each->push_back(f);
    all += f;
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(frames_split_at_every_byte_position) {
  std::vector<std::string> expect;
  const std::string all = many_frames(3, &expect);
  for (std::size_t cut = 0; cut <= all.size(); ++cut) {
    feeder f;
    BOOST_TEST_REQUIRE(f.feed(std::string_view(all).substr(0, cut)));
    BOOST_TEST_REQUIRE(f.feed(std::string_view(all).substr(cut)));
    BOOST_TEST_REQUIRE(f.frames.size() == expect.size());
    for (std::size_t i = 0; i < expect.size(); ++i)
      BOOST_TEST(f.frames[i].bytes == expect[i]);
    BOOST_TEST(!f.stream.has_partial());
    BOOST_TEST(f.stream.offset() == all.size());
  }
}

BOOST_AUTO_TEST_CASE(one_byte_at_a_time) {
  std::vector<std::string> expect;
  const std::string all = many_frames(20, &expect);
  feeder f;
  for (char c : all)
    BOOST_TEST_REQUIRE(f.feed(std::string_view(&c, 1)));
  BOOST_TEST(f.frames.size() == expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i)
    BOOST_TEST(f.frames[i].bytes == expect[i]);
}

BOOST_AUTO_TEST_CASE(thousands_of_frames_in_one_chunk_and_random_splits) {
  std::vector<std::string> expect;
  const std::string all = many_frames(5000, &expect);
  std::mt19937 rng(7);
  feeder f;
  std::string_view rest = all;
  while (!rest.empty()) {
    const std::size_t n = std::min<std::size_t>(rest.size(), 1 + rng() % 40000);
    BOOST_TEST_REQUIRE(f.feed(rest.substr(0, n)));
    rest.remove_prefix(n);
  }
  BOOST_TEST_REQUIRE(f.frames.size() == expect.size());
  BOOST_TEST(std::equal(expect.begin(), expect.end(), f.frames.begin(),
                        [](const std::string& e, const received& r) { return e == r.bytes; }));
}

BOOST_AUTO_TEST_CASE(a_frame_larger_than_a_chunk_gets_a_chunk_of_its_size) {
  const std::string big = encode_frame("big", std::string(frame_chunk::standard_capacity * 3, 'b'));
  feeder f;
  BOOST_TEST_REQUIRE(f.feed(encode_frame("small", "s") + big.substr(0, 100)));
  BOOST_TEST_REQUIRE(f.feed(std::string_view(big).substr(100)));
  BOOST_TEST_REQUIRE(f.frames.size() == 2u);
  BOOST_TEST(f.frames[1].bytes == big);
}

// A peer that announces a large frame and sends a few bytes makes the gateway hold memory for
// those bytes, not for what it announced: the buffer doubles as bytes arrive (at most twice
// what is buffered, or one standard chunk), so a frame of n bytes moves O(log n) times and is
// copied less than once over in all.
BOOST_AUTO_TEST_CASE(a_large_frame_holds_memory_for_what_arrived_not_what_it_announced) {
  const std::string big = encode_frame("big", std::string(default_max_payload, 'b'));
  const std::size_t before = frame_chunk::live_bytes();
  feeder f;
  BOOST_TEST_REQUIRE(f.feed(std::string_view(big).substr(0, 20)));
  BOOST_TEST_REQUIRE(f.feed(std::string_view(big).substr(20, 10)));  // the read after the header
  BOOST_TEST(f.stream.chunk()->capacity() == frame_chunk::standard_capacity);
  BOOST_TEST(frame_chunk::live_bytes() - before <= frame_chunk::standard_capacity);

  std::mt19937 rng(11);
  std::set<const frame_chunk*> chunks;
  std::size_t at = 30;
  while (at < big.size()) {
    const std::size_t n = std::min<std::size_t>(big.size() - at, 1 + rng() % 50000);
    BOOST_TEST_REQUIRE(f.feed(std::string_view(big).substr(at, n)));
    at += n;
    if (at == big.size()) break;
    chunks.insert(f.stream.chunk());
    const std::size_t held = f.stream.buffered();
    BOOST_TEST(f.stream.chunk()->capacity() <=
                   std::max(frame_chunk::standard_capacity, 2 * held + frame_stream::min_read),
               "holding " << held << " bytes of the frame");
  }
  BOOST_TEST(chunks.size() <= 6u);  // 64 KiB doubling to 1 MiB
  BOOST_TEST_REQUIRE(f.frames.size() == 1u);
  BOOST_TEST(f.frames[0].bytes == big);
}

BOOST_AUTO_TEST_CASE(a_large_frame_sent_at_once_arrives_whole_after_small_ones) {
  const std::string small = encode_frame("small", "s");
  const std::string big = encode_frame("big", std::string(200000, 'x'));
  for (std::size_t piece : {std::size_t{0}, std::size_t{4096}, std::size_t{65536}}) {
    feeder f;
    const std::string all = small + big + small;
    if (piece == 0) {
      BOOST_TEST_REQUIRE(f.feed(all));
    } else {
      for (std::size_t at = 0; at < all.size(); at += piece)
        BOOST_TEST_REQUIRE(f.feed(std::string_view(all).substr(at, piece)));
    }
    BOOST_TEST_REQUIRE(f.frames.size() == 3u);
    BOOST_TEST(f.frames[1].bytes == big);
    BOOST_TEST(f.frames[2].bytes == small);
  }
}

// The hot path: a frame that fits a standard chunk is read into one and never moved again.
BOOST_AUTO_TEST_CASE(frames_that_fit_a_chunk_stay_in_standard_chunks) {
  feeder f;
  const std::string frame = encode_frame("mid", std::string(40000, 'm'));
  std::string all;
  for (int i = 0; i < 10; ++i)
    all += frame;
  for (std::size_t at = 0; at < all.size(); at += 7000)
    BOOST_TEST_REQUIRE(f.feed(std::string_view(all).substr(at, 7000)));
  BOOST_TEST_REQUIRE(f.frames.size() == 10u);
  for (const auto& c : f.held)
    BOOST_TEST(c->capacity() == frame_chunk::standard_capacity);
}

// Feeds `bytes` to `s` until they are all in or the budget refuses to let the frame grow;
// returns how many went in.
std::size_t feed_until_refused(frame_stream& s, std::string_view bytes) {
  std::size_t fed = 0;
  while (fed < bytes.size()) {
    const auto buf = s.prepare();
    if (buf.size == 0) break;
    const std::size_t n = std::min(buf.size, bytes.size() - fed);
    std::memcpy(buf.data, bytes.data() + fed, n);
    s.commit(n);
    fed += n;
    BOOST_TEST_REQUIRE(!s.parse([](const frame_view&, const frame_slice&) {}));
  }
  return fed;
}

// Growth past a standard chunk is paid from the budget the streams share, only for what
// exceeds that chunk, and given back when the stream lets the buffer go.
BOOST_AUTO_TEST_CASE(large_frames_share_a_budget_for_what_exceeds_a_chunk) {
  constexpr std::size_t cap = 1200 * 1024;  // one large frame and a bit
  gatewayd::runtime::byte_budget budget(cap);
  const std::string big = encode_frame("big", std::string(default_max_payload, 'b'));
  auto a = std::make_unique<frame_stream>(default_max_payload, &budget);
  BOOST_TEST_REQUIRE(feed_until_refused(*a, std::string_view(big).substr(0, 600000)) == 600000u);
  BOOST_TEST(budget.used() == a->chunk()->capacity() - frame_chunk::standard_capacity);
  BOOST_TEST(budget.used() <= cap);

  // A second frame gets as far as the rest of the budget lets it, then is refused.
  frame_stream b(default_max_payload, &budget);
  const std::size_t got = feed_until_refused(b, big);
  BOOST_TEST(got < big.size());
  BOOST_TEST(got > frame_chunk::standard_capacity);
  BOOST_TEST(budget.used() <= cap);
  BOOST_TEST(b.prepare().size == 0u);  // still refused: nothing changed
  BOOST_TEST(b.buffered() == got);

  // Once `a` is gone, `b` completes its frame, then gives everything back when idle.
  a.reset();
  std::size_t frames = 0;
  std::string_view rest = std::string_view(big).substr(got);
  while (!rest.empty()) {
    const auto buf = b.prepare();
    BOOST_TEST_REQUIRE(buf.size > 0u);
    const std::size_t n = std::min(buf.size, rest.size());
    std::memcpy(buf.data, rest.data(), n);
    b.commit(n);
    rest.remove_prefix(n);
    BOOST_TEST_REQUIRE(!b.parse(
        [&](const frame_view& f, const frame_slice&) { frames += f.bytes == big ? 1 : 0; }));
  }
  BOOST_TEST(frames == 1u);
  b.release_if_idle();
  BOOST_TEST(budget.used() == 0u);
}

// A budget of max_payload always lets one frame of max_payload through, whatever its pieces.
BOOST_AUTO_TEST_CASE(a_budget_of_max_payload_fits_the_largest_frame) {
  for (std::uint32_t max : {std::uint32_t{65536}, std::uint32_t{100000}, default_max_payload}) {
    gatewayd::runtime::byte_budget budget(max);
    frame_stream s(max, &budget);
    const std::string big = encode_frame(std::string(255, 'a'), std::string(max, 'p'));
    std::mt19937 rng(max);
    std::size_t at = 0;
    while (at < big.size()) {
      const std::size_t n = std::min<std::size_t>(big.size() - at, 1 + rng() % 70000);
      BOOST_TEST_REQUIRE(feed_until_refused(s, std::string_view(big).substr(at, n)) == n);
      at += n;
    }
    BOOST_TEST(s.offset() == big.size());
  }
}

BOOST_AUTO_TEST_CASE(oversized_header_is_refused_before_allocating) {
  const std::size_t before = frame_chunk::live_bytes();
  feeder f(1024);
  std::string h = encode_frame("ok", "1") + encode_frame("a", "");
  h[h.size() - 4] = char(0xff);  // second frame now announces ~4 GiB
  BOOST_TEST(!f.feed(h));
  BOOST_TEST(f.frames.size() == 1u);
  BOOST_TEST(to_string(f.error.reason) == "payload_too_large");
  BOOST_TEST(f.error.offset == encode_frame("ok", "1").size() + 6);
  BOOST_TEST(frame_chunk::live_bytes() - before <= frame_chunk::standard_capacity);
}

BOOST_AUTO_TEST_CASE(error_offset_counts_the_whole_stream) {
  std::vector<std::string> expect;
  const std::string good = many_frames(2000, &expect);  // spans many chunks
  feeder f;
  BOOST_TEST_REQUIRE(f.feed(good));
  std::string bad = encode_frame("abc", "");
  bad[header_size + 1] = ' ';
  BOOST_TEST(!f.feed(bad));
  BOOST_TEST(f.frames.size() == expect.size());
  BOOST_TEST(to_string(f.error.reason) == "bad_address");
  BOOST_TEST(f.error.offset == good.size() + header_size + 1);
}

BOOST_AUTO_TEST_CASE(idle_stream_releases_its_chunk_but_keeps_a_partial_frame) {
  feeder f;
  BOOST_TEST_REQUIRE(f.feed(encode_frame("a", "b")));
  f.held.clear();
  f.stream.release_if_idle();
  BOOST_TEST(f.stream.chunk() == nullptr);
  const std::string next = encode_frame("c", "d");
  BOOST_TEST_REQUIRE(f.feed(next.substr(0, 5)));
  f.stream.release_if_idle();
  BOOST_TEST(f.stream.chunk() != nullptr);
  BOOST_TEST_REQUIRE(f.feed(next.substr(5)));
  BOOST_TEST(f.frames.size() == 2u);
  BOOST_TEST(f.frames[1].bytes == next);
}

BOOST_AUTO_TEST_CASE(chunks_are_freed_when_the_last_reference_goes) {
  const std::size_t before = frame_chunk::live_bytes();
  {
    feeder f;
    std::vector<std::string> expect;
    BOOST_TEST_REQUIRE(f.feed(many_frames(3000, &expect)));
  }
  // Everything returned: only the per-thread cache may still hold standard chunks.
  BOOST_TEST(frame_chunk::live_bytes() <= before + 16 * frame_chunk::standard_capacity);
}

BOOST_AUTO_TEST_CASE(an_idle_streams_chunk_tail_is_continued_by_the_next_stream_on_the_thread) {
  // Two slow suppliers on one thread: the second reads into the tail of the first one's
  // chunk instead of taking a fresh 64 KiB chunk, and neither sees the other's bytes.
  feeder a, b;
  const std::string fa = encode_frame("a.one", "first");
  BOOST_TEST_REQUIRE(a.feed(fa));
  frame_chunk* shared = a.stream.chunk();
  a.stream.release_if_idle();
  BOOST_TEST(a.stream.chunk() == nullptr);

  const std::string fb = encode_frame("b.one", "second");
  BOOST_TEST_REQUIRE(b.feed(fb.substr(0, 3)));  // a partial frame keeps the chunk
  BOOST_TEST(b.stream.chunk() == shared);
  BOOST_TEST_REQUIRE(b.feed(fb.substr(3)));
  BOOST_TEST_REQUIRE(b.frames.size() == 1u);
  BOOST_TEST(b.frames[0].bytes == fb);
  BOOST_TEST(a.frames[0].bytes == fa);         // untouched by b's writes after it
  BOOST_TEST(b.stream.offset() == fb.size());  // b's own stream offset, not the chunk's

  // b's next bad byte is reported at b's stream offset.
  b.stream.release_if_idle();
  BOOST_TEST(!b.feed("X"));
  BOOST_TEST(b.error.offset == fb.size());
}

BOOST_AUTO_TEST_CASE(a_repeated_address_is_still_checked_field_by_field) {
  // After one frame validated "same.addr", later frames with that address take a shorter
  // path; every header field must still be checked there, split anywhere.
  const std::string one = encode_frame("same.addr", "payload-1");
  const std::string two = encode_frame("same.addr", std::string(300, 'x'));
  const std::string good = one + two + one;
  for (std::size_t cut = 0; cut <= good.size(); ++cut) {
    feeder f;
    BOOST_TEST_REQUIRE(f.feed(std::string_view(good).substr(0, cut)));
    BOOST_TEST_REQUIRE(f.feed(std::string_view(good).substr(cut)));
    BOOST_TEST_REQUIRE(f.frames.size() == 3u);
    BOOST_TEST(f.frames[1].bytes == two);
    BOOST_TEST(f.frames[2].address == "same.addr");
  }
  struct corruption {
    std::size_t at;
    char value;
    const char* reason;
  };
  for (const corruption c :
       {corruption{0, 'X', "bad_magic"}, corruption{2, 2, "bad_version"},
        corruption{3, '\x80', "bad_flags"},  // CONTROL: never from a supplier
        corruption{4, 1, "address_too_long"}, corruption{6, 0x7f, "payload_too_large"},
        corruption{header_size + 3, '.', "bad_address"}}) {
    feeder f(1024);
    std::string bad = one;
    bad[c.at] = c.value;
    BOOST_TEST(!f.feed(one + one + bad));
    BOOST_TEST(f.frames.size() == 2u, c.reason);
    BOOST_TEST(to_string(f.error.reason) == c.reason);
  }
}

// Addresses that share their first bytes with the last one (t.x.00000001, t.x.00000002) have
// only the rest checked: every bad byte after the shared part is still refused at its offset,
// whatever the shared part ends with, and a good address after a bad one is not taken for it.
BOOST_AUTO_TEST_CASE(addresses_sharing_a_prefix_are_checked_past_it) {
  const std::string known = encode_frame("t.x.00000001", "p");
  const std::string good = known + encode_frame("t.x.00000002", "p") + encode_frame("t.y", "p") +
                           encode_frame("t.x.00000002.z", "p") + encode_frame("t", "p");
  feeder ok;
  BOOST_TEST_REQUIRE(ok.feed(good));
  BOOST_TEST_REQUIRE(ok.frames.size() == 5u);
  BOOST_TEST(ok.frames[1].address == "t.x.00000002");
  BOOST_TEST(ok.frames[2].address == "t.y");
  BOOST_TEST(ok.frames[3].address == "t.x.00000002.z");
  BOOST_TEST(ok.frames[4].address == "t");
  struct bad_address {
    const char* address;
    std::size_t offset;  // of the byte blamed, in the address
  };
  for (const bad_address b :
       {bad_address{"t.x.0000000$", 11}, bad_address{"t.x..1", 4}, bad_address{"t.x.", 3},
        bad_address{"t.x.00000001.", 12}, bad_address{"t.x.0000 001", 8},
        bad_address{"t.x.00000001\x80", 12}}) {
    feeder f;
    const std::string bad = encode_frame(b.address, "p");
    BOOST_TEST(!f.feed(known + bad), b.address);
    BOOST_TEST(f.frames.size() == 1u);
    BOOST_TEST(to_string(f.error.reason) == "bad_address");
    BOOST_TEST(f.error.offset == known.size() + header_size + b.offset, b.address);
  }
}

// What the shortcut keeps of an address must be all of it: "txxxx.yy", then "txxxxx" (a tail
// of one token byte), then "txxxx." (the first address's bytes at the second's length, ending
// in a dot) must be refused. A copy that left any byte of the second address out would keep
// "txxxx." as the address last validated and take the third frame as a repeat of it.
BOOST_AUTO_TEST_CASE(what_the_shortcut_keeps_is_the_whole_address_it_took) {
  for (std::size_t n = 2; n <= 70; ++n) {
    const std::string stem = "t" + std::string(n - 2, 'x');
    const std::string first = stem + ".yy", second = stem + "x", third = stem + ".";
    feeder f;
    const std::string taken = encode_frame(first, "p") + encode_frame(second, "p");
    BOOST_TEST_REQUIRE(f.feed(taken + encode_frame(third, "p")) == false, n);
    BOOST_TEST_REQUIRE(f.frames.size() == 2u);
    BOOST_TEST_REQUIRE(f.frames[1].address == second);
    BOOST_TEST_REQUIRE(f.error.offset == taken.size() + header_size + n - 1, n);
  }
}

// The shortcut for addresses that differ from the last one only in their tail, tried against
// the full check: random addresses, each a random prefix of the last one taken plus random
// bytes (token bytes, dots, now and then a bad byte; some too long for the shortcut), fed to one
// stream. A valid one must come out with its own bytes, an invalid one be refused at the byte
// first_bad_address_byte() blames, and the stream that refused it is replaced by one that took
// the last good address, so the shortcut's copy of it is checked frame after frame.
BOOST_AUTO_TEST_CASE(the_tail_shortcut_agrees_with_the_full_address_check) {
  std::mt19937 rng(45);
  const std::string bytes = "abcxyz0123456789_-ABC..";  // dots: one in 11, so empty tokens too
  const auto next_address = [&](const std::string& last) {
    std::string a = last.substr(0, rng() % (last.size() + 1));
    for (std::size_t n = rng() % 12; n > 0; --n)
      a += rng() % 60 == 0 ? '$' : bytes[rng() % bytes.size()];
    if (rng() % 50 == 0) a += std::string(60, 'q');  // past the shortcut's 64 bytes
    return a.empty() || a.size() > max_address_length ? std::string("t") : a;
  };
  std::string last = "t.x.00000001";
  auto f = std::make_unique<feeder>();
  BOOST_TEST_REQUIRE(f->feed(encode_frame(last, "p")));
  std::size_t valid = 0, invalid = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string address = next_address(last);
    const std::size_t before = f->frames.size();
    const std::string frame = encode_frame(address, "p");
    if (valid_address(address)) {
      ++valid;
      BOOST_TEST_REQUIRE(f->feed(frame), address);
      BOOST_TEST_REQUIRE(f->frames.size() == before + 1);
      BOOST_TEST_REQUIRE(f->frames.back().address == address);
      last = address;
      continue;
    }
    ++invalid;
    const std::uint64_t at = f->stream.offset();
    BOOST_TEST_REQUIRE(!f->feed(frame), address);
    BOOST_TEST_REQUIRE(f->frames.size() == before);
    BOOST_TEST_REQUIRE(to_string(f->error.reason) == "bad_address");
    BOOST_TEST_REQUIRE(f->error.offset == at + header_size + first_bad_address_byte(address),
                       address);
    f = std::make_unique<feeder>();
    BOOST_TEST_REQUIRE(f->feed(encode_frame(last, "p")));
  }
  BOOST_TEST(valid > 5000u);  // both kinds, many of each
  BOOST_TEST(invalid > 2000u);
}

// A supplier's CONFIRM frames come out with their flag, on the known-address fast path too (the
// same address repeated) and mixed with plain frames; a CONTROL frame is a protocol error.
BOOST_AUTO_TEST_CASE(confirm_frames_pass_with_their_flag_and_control_frames_do_not) {
  feeder f(default_max_payload, supplier_frames);
  std::string bytes;
  for (int i = 0; i < 6; ++i)
    bytes += encode_frame("orders.eu", std::to_string(i),
                          i % 3 == 2 ? frame_flags::data : frame_flags::confirm);
  BOOST_TEST_REQUIRE(f.feed(bytes));
  BOOST_TEST_REQUIRE(f.frames.size() == 6u);
  for (int i = 0; i < 6; ++i)
    BOOST_TEST(f.frames[i].flags == (i % 3 == 2 ? frame_flags::data : frame_flags::confirm));
  BOOST_TEST(!f.feed(encode_frame("orders.eu", "x", frame_flags::control)));
  BOOST_TEST(to_string(f.error.reason) == "bad_flags");
  BOOST_TEST(f.frames.size() == 6u);
}
