// spool_thread_test's helpers: numbered frames in real chunks (CONFIRM frames with entries of a
// real ledger), a spool_events that hands read answers over, waits on conditions, not sleeps.
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "consumers/spool_thread.hpp"
#include "protocol/confirm_ledger.hpp"
#include "protocol/frame_chunk.hpp"

namespace gatewayd::test::spool_frames {

namespace protocol = gatewayd::protocol;
using consumers::spool;
using consumers::spool_thread;
using protocol::frame_slice;
using protocol::reject_reason;
inline constexpr auto deadline = std::chrono::seconds(20);

// A supplier connection's ledger; its owner is woken on each settlement.
struct owner : protocol::confirm_owner {
  std::mutex m;
  std::condition_variable cv;
  void confirms_settled() noexcept override {
    { std::lock_guard lock(m); }
    cv.notify_all();
  }
};

// Frames numbered from 0, `size` bytes each: the number, then bytes derived from it. Each chunk
// keeps the test's own reference, so refs() - 1 is what the spool (or anyone) holds.
struct frames {
  std::shared_ptr<owner> o = std::make_shared<owner>();
  protocol::confirm_ledger_ptr ledger = protocol::confirm_ledger::make(o, 1u << 20);
  std::vector<protocol::chunk_ptr> chunks;
  std::uint64_t next = 0;
  std::map<std::uint64_t, reject_reason> rejects;  // by ledger number (1-based)

  static std::string bytes_of(std::uint64_t seq, std::size_t size) {
    std::string s(size, '\0');
    std::memcpy(s.data(), &seq, std::min(size, sizeof seq));
    for (std::size_t i = sizeof seq; i < size; ++i)
      s[i] = static_cast<char>((seq * 31 + i) & 0xff);
    return s;
  }
  // n frames in one new chunk, each owning one reference; CONFIRM frames when `confirm`.
  std::vector<frame_slice> make(std::size_t n, bool confirm, std::uint32_t size = 100) {
    chunks.emplace_back(protocol::frame_chunk::acquire(n * size));
    protocol::frame_chunk* c = chunks.back().get();
    std::vector<frame_slice> out;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::string b = bytes_of(next++, size);
      std::memcpy(c->data() + i * size, b.data(), size);
      out.push_back({c, i * size, size, confirm ? ledger->add(1) : nullptr});
    }
    c->add_refs(static_cast<std::uint32_t>(n));
    return out;
  }
  std::uint32_t held_refs() const {
    std::uint32_t n = 0;
    for (const auto& c : chunks)
      n += c->refs() - 1;
    return n;
  }
  // The ledger's cumulative confirm once it reaches `n` (waited for), or as it is at the deadline.
  std::uint64_t confirmed_at_least(std::uint64_t n) {
    std::unique_lock lock(o->m);
    o->cv.wait_for(lock, deadline, [&] { return advance() >= n; });
    return ledger->confirmed();
  }
  std::uint64_t advance() {
    ledger->advance([&](std::uint64_t n, reject_reason why) { rejects.emplace(n, why); });
    return ledger->confirmed();
  }
};

// The frame number a record's bytes carry, its bytes checked.
inline std::uint64_t seq_of(const frame_slice& s) {
  std::uint64_t seq = ~std::uint64_t{0};
  BOOST_REQUIRE(s.size >= sizeof seq);
  std::memcpy(&seq, s.data(), sizeof seq);
  BOOST_TEST((std::string(s.bytes()) == frames::bytes_of(seq, s.size)));
  return seq;
}

// Read answers, handed to the test thread.
struct reader : consumers::spool_events {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::pair<std::vector<frame_slice>, std::uint64_t>> answers;

  void spool_read_done(std::vector<frame_slice> got, std::uint64_t generation) override {
    {
      std::lock_guard lock(m);
      answers.emplace_back(std::move(got), generation);
    }
    cv.notify_all();
  }
  // The next answer (its references now the caller's); fails the test at the deadline.
  std::pair<std::vector<frame_slice>, std::uint64_t> next() {
    std::unique_lock lock(m);
    BOOST_REQUIRE(cv.wait_for(lock, deadline, [&] { return !answers.empty(); }));
    auto a = std::move(answers.front());
    answers.erase(answers.begin());
    return a;
  }
};

// Reads until an empty answer: the frames' numbers in order, their references given back.
inline std::vector<std::uint64_t> read_all(spool& s, reader& r, std::size_t max_bytes = 1000) {
  std::vector<std::uint64_t> seqs;
  for (;;) {
    s.read(max_bytes, 1);
    auto [got, generation] = r.next();
    BOOST_TEST(generation == 1u);
    if (got.empty()) return seqs;
    BOOST_TEST(got.front().chunk->refs() == got.size());  // one reference per record
    // Back to back in one chunk: the writer sends a read as one piece.
    for (std::size_t i = 1; i < got.size(); ++i)
      BOOST_TEST(got[i - 1].adjacent(got[i]));
    for (const auto& f : got) {
      BOOST_TEST(!f.confirm);
      seqs.push_back(seq_of(f));
    }
    protocol::deliver_slices(got);
  }
}

// Everything queued for `s` done and synced.
inline void flushed(spool& s) {
  std::promise<void> done;
  auto f = done.get_future();
  s.flush([&] { done.set_value(); });
  BOOST_REQUIRE(f.wait_for(deadline) == std::future_status::ready);
}

inline std::shared_ptr<spool> open_spool(spool_thread& t, const std::filesystem::path& dir,
                                         std::atomic<std::uint64_t>& settled,
                                         const std::shared_ptr<reader>& r,
                                         std::uint64_t max_bytes = 1ull << 30) {
  std::error_code ec;
  auto s = t.open(dir, max_bytes, &settled, r, ec);
  BOOST_REQUIRE_MESSAGE(s && !ec, "open: " << ec.message());
  return s;
}

inline std::vector<std::uint64_t> seq_range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = from; i < to; ++i)
    v.push_back(i);
  return v;
}

}  // namespace gatewayd::test::spool_frames
