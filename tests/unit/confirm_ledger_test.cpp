// The ledger of a supplier's CONFIRM frames: the cumulative confirm waits for the oldest frame
// still owed, rejects come out in order with their first reason, frames settled as they are
// read are rejected at once and take no entry, a frame left unsettled (a stop) is never
// confirmed, the capacity holds, blocks come and go, and threads settling at once (as consumers'
// strands do) lose no frame and no wake-up; a ledger outlives its owner only while frames are
// owed, and then keeps only the blocks of those frames.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "protocol/confirm_ledger.hpp"

using namespace gatewayd::protocol;

namespace {

struct owner : confirm_owner {
  std::atomic<int> wakes{0};
  void confirms_settled() noexcept override { wakes.fetch_add(1); }
};

struct fixture {
  std::shared_ptr<owner> o = std::make_shared<owner>();
  confirm_ledger_ptr ledger;
  std::vector<std::pair<std::uint64_t, reject_reason>> rejects;

  explicit fixture(std::size_t capacity = 1u << 20) : ledger(confirm_ledger::make(o, capacity)) {}

  std::optional<std::uint64_t> advance() {
    return ledger->advance([&](std::uint64_t n, reject_reason r) { rejects.emplace_back(n, r); });
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_cumulative_confirm_waits_for_the_oldest_frame_still_owed) {
  fixture f;
  confirm_entry* one = f.ledger->add(2);
  confirm_entry* two = f.ledger->add(1);
  confirm_entry* three = f.ledger->add(1);
  BOOST_TEST(f.ledger->pending() == 3u);
  BOOST_TEST(!f.advance().has_value());
  three->delivered();
  two->delivered();
  BOOST_TEST(!f.advance().has_value());  // 1 is still owed by both its consumers
  one->delivered();
  BOOST_TEST(!f.advance().has_value());  // and by one of them
  one->delivered();
  BOOST_TEST(f.o->wakes.load() >= 1);
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(3));
  BOOST_TEST(f.ledger->confirmed() == 3u);
  BOOST_TEST(f.ledger->pending() == 0u);
  BOOST_TEST(f.rejects.empty());
}

BOOST_AUTO_TEST_CASE(rejects_come_before_the_confirm_that_covers_them_with_their_first_reason) {
  fixture f;
  confirm_entry* a = f.ledger->add(2);
  BOOST_TEST(f.ledger->reject_at_read(reject_reason::unroutable));  // no consumer: no entry
  confirm_entry* c = f.ledger->add(2);
  BOOST_TEST(f.ledger->reject_at_read(reject_reason::not_permitted));
  a->rejected(reject_reason::dropped);
  a->rejected(reject_reason::removed);  // the first reason stands
  c->delivered();
  c->rejected(reject_reason::removed);
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(4));
  // Those rejected at read first (they wait for nothing), then the settled ones in order.
  const std::vector<std::pair<std::uint64_t, reject_reason>> want{{2, reject_reason::unroutable},
                                                                  {4, reject_reason::not_permitted},
                                                                  {1, reject_reason::dropped},
                                                                  {3, reject_reason::removed}};
  BOOST_TEST((f.rejects == want));
}

// The contract: a reason known at read goes out without waiting for earlier frames, and the
// cumulative confirm still covers no frame that is not settled.
BOOST_AUTO_TEST_CASE(frames_rejected_at_read_go_out_at_once_and_the_confirm_skips_them) {
  fixture f;
  confirm_entry* owed = f.ledger->add(1);
  for (int i = 0; i < 3; ++i)
    BOOST_TEST(f.ledger->reject_at_read(reject_reason::unroutable));
  confirm_entry* later = f.ledger->add(1);
  BOOST_TEST(f.ledger->reject_at_read(reject_reason::not_permitted));
  BOOST_TEST(f.ledger->blocks() == 2u);  // the two routed frames' entries only (1, then 2)
  BOOST_TEST(!f.advance().has_value());  // 1 is owed: no confirm
  const std::vector<std::pair<std::uint64_t, reject_reason>> at_once{
      {2, reject_reason::unroutable},
      {3, reject_reason::unroutable},
      {4, reject_reason::unroutable},
      {6, reject_reason::not_permitted}};
  BOOST_TEST((f.rejects == at_once));
  later->delivered();
  BOOST_TEST(!f.advance().has_value());  // still 1
  owed->delivered();
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(6));
  BOOST_TEST(f.rejects.size() == 4u);  // each reject once
  BOOST_TEST(f.ledger->reject_at_read(reject_reason::unroutable));
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(7));  // nothing owed before it
}

// A reject that finds no room (the owner's buffer is full) holds the confirm before it, and is
// given out by the next advance.
BOOST_AUTO_TEST_CASE(a_reject_at_read_without_room_holds_the_confirm_until_it_is_out) {
  fixture f;
  for (int i = 0; i < 4; ++i)
    f.ledger->reject_at_read(reject_reason::unroutable);
  int room = 2;
  std::vector<std::uint64_t> out;
  const auto first = f.ledger->advance([&](std::uint64_t n, reject_reason) {
    if (room == 0) return false;
    --room;
    out.push_back(n);
    return true;
  });
  BOOST_TEST(first.value_or(0) == std::uint64_t(2));  // 1 and 2 are out; 3 is not
  room = 10;
  const auto second = f.ledger->advance([&](std::uint64_t n, reject_reason) {
    out.push_back(n);
    return true;
  });
  BOOST_TEST(second.value_or(0) == std::uint64_t(4));
  BOOST_TEST((out == std::vector<std::uint64_t>{1, 2, 3, 4}));
}

// A stop never rejects: a frame one consumer left unsettled is never confirmed, whatever the
// others said, and holds every later frame back with it; the ledger still goes once settled.
BOOST_AUTO_TEST_CASE(a_frame_left_unsettled_is_never_confirmed) {
  fixture f;
  confirm_entry* a = f.ledger->add(2);
  confirm_entry* b = f.ledger->add(1);
  a->rejected(reject_reason::dropped);
  a->left_unsettled();
  b->delivered();
  BOOST_TEST(!f.advance().has_value());
  BOOST_TEST(f.rejects.empty());
  confirm_entry* c = f.ledger->add(1);
  c->given_up(std::nullopt);
  BOOST_TEST(f.ledger->reject_at_read(reject_reason::unroutable));
  BOOST_TEST(!f.advance().has_value());
  BOOST_TEST(f.rejects.size() == 1u);  // the one known at read, at once
  BOOST_TEST(f.ledger->confirmed() == 0u);
  BOOST_TEST(f.ledger->pending() == 4u);
}

// A closed connection keeps only what is still owed: the blocks holding an entry a consumer
// still owes, and the ledger's anchor; the ledger and every other block go when the owner lets
// go, and the rest with the last frame settled. The budget sees each step.
BOOST_AUTO_TEST_CASE(a_closed_ledger_keeps_only_the_blocks_of_frames_still_owed) {
  gatewayd::runtime::byte_budget budget;
  auto o = std::make_shared<owner>();
  auto ledger = confirm_ledger::make(o, 1u << 20, &budget);
  BOOST_TEST(budget.used() == confirm_ledger::ledger_bytes());
  // Blocks of 1, 2, 4, ... 32 entries (63 in all), then of 64: ten blocks, the last not full
  // (its entries never numbered hold it no longer than the rest).
  constexpr std::size_t blocks = 10;
  constexpr std::size_t full = confirm_ledger::block_entries;
  const std::size_t frames = (full - 1) + (blocks - 6) * full - 3;
  std::vector<confirm_entry*> e;
  std::size_t block_bytes = 0;
  for (std::size_t i = 0; i < frames; ++i) {
    e.push_back(ledger->add(1));
    ledger->reject_at_read(reject_reason::unroutable);  // no entry, no block
  }
  for (std::size_t b = 0; b < blocks; ++b)
    block_bytes += confirm_ledger::block_bytes(std::min<std::size_t>(std::size_t{1} << b, full));
  BOOST_TEST(ledger->blocks() == blocks);
  BOOST_TEST(budget.used() >= confirm_ledger::ledger_bytes() + block_bytes);
  // Everything settled but one frame in the eighth block and one in the last.
  confirm_entry* const owed_a = e[(full - 1) + full + 5];
  confirm_entry* const owed_b = e.back();
  for (confirm_entry* x : e) {
    if (x != owed_a && x != owed_b) x->delivered();
  }
  ledger.reset();  // the connection closes
  BOOST_TEST(budget.used() ==
             confirm_ledger::closed_bytes() + 2 * confirm_ledger::block_bytes(full));
  owed_a->delivered();
  BOOST_TEST(budget.used() == confirm_ledger::closed_bytes() + confirm_ledger::block_bytes(full));
  owed_b->left_unsettled();
  BOOST_TEST(budget.used() == 0u);  // the anchor is gone too (LeakSanitizer checks it)
  BOOST_TEST(o->wakes.load() >= 1);
}

// Frames rejected at read cost a run, not an entry each: 100,000 unroutable frames in a row
// hold no block, and what the budget counts stays small.
BOOST_AUTO_TEST_CASE(frames_rejected_at_read_take_no_ledger_space) {
  gatewayd::runtime::byte_budget budget;
  fixture f;
  f.ledger = confirm_ledger::make(f.o, 1u << 20, &budget);
  for (int i = 0; i < 100000; ++i)
    BOOST_TEST_REQUIRE(f.ledger->reject_at_read(reject_reason::unroutable));
  BOOST_TEST(f.ledger->blocks() == 0u);
  BOOST_TEST(budget.used() <= confirm_ledger::ledger_bytes() + 64);
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(100000));
  BOOST_TEST(f.rejects.size() == 100000u);
  f.ledger.reset();
  BOOST_TEST(budget.used() == 0u);
}

BOOST_AUTO_TEST_CASE(the_capacity_holds_until_the_confirm_makes_room) {
  fixture f(3);
  std::vector<confirm_entry*> e;
  for (int i = 0; i < 3; ++i)
    e.push_back(f.ledger->add(1));
  BOOST_TEST(f.ledger->add(1) == nullptr);
  e[1]->delivered();
  f.advance();
  BOOST_TEST(f.ledger->add(1) == nullptr);  // settled, but not confirmed: 1 is still owed
  e[0]->delivered();
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(2));
  confirm_entry* d = f.ledger->add(1);
  confirm_entry* g = f.ledger->add(1);
  BOOST_TEST(d != nullptr);
  BOOST_TEST(g != nullptr);
  BOOST_TEST(f.ledger->add(1) == nullptr);
  // Every frame a consumer holds is settled in the end (or the ledger stays: LeakSanitizer).
  for (confirm_entry* x : {e[2], d, g})
    x->delivered();
}

BOOST_AUTO_TEST_CASE(numbers_cross_blocks_and_blocks_are_given_back) {
  fixture f;
  constexpr std::size_t n = 3 * confirm_ledger::block_entries + 17;
  std::vector<confirm_entry*> e;
  for (std::size_t i = 0; i < n; ++i)
    e.push_back(f.ledger->add(1));
  // Settled backwards: nothing is confirmed until the first one is.
  for (std::size_t i = n; i-- > 1;)
    e[i]->delivered();
  BOOST_TEST(!f.advance().has_value());
  e[0]->delivered();
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(n));
  for (std::size_t i = 0; i < n; ++i)
    f.ledger->reject_at_read(reject_reason::unroutable);
  BOOST_TEST(f.ledger->blocks() == 1u);  // the last routed frames' block, not yet passed
  BOOST_TEST(f.advance().value_or(0) == std::uint64_t(2 * n));
  BOOST_TEST(f.rejects.size() == n);
  BOOST_TEST(f.rejects.front().first == n + 1);
}

// Consumers settle on their own threads, in any order, one by one or by runs (as a written
// batch is: confirm_settlements); the owner advances only when it is woken (as the session does
// on its strand). Every frame ends up confirmed once, none is lost, and a wake-up is never
// missed: a missed one leaves the owner waiting until the deadline, short of the last frame.
BOOST_AUTO_TEST_CASE(threads_settling_at_once_lose_no_frame_and_no_wake_up) {
  constexpr int frames = 200'000;
  constexpr int consumers = 3;
  struct waking_owner : confirm_owner {
    std::mutex m;
    std::condition_variable cv;
    bool due = false;
    void confirms_settled() noexcept override {
      std::lock_guard lock(m);
      due = true;
      cv.notify_one();
    }
  };
  auto o = std::make_shared<waking_owner>();
  auto ledger = confirm_ledger::make(o, frames);
  std::vector<confirm_entry*> entries;
  for (int i = 0; i < frames; ++i)
    entries.push_back(ledger->add(consumers));
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(c);
      std::vector<int> order(frames);
      for (int i = 0; i < frames; ++i)
        order[i] = i;
      // Mostly in order (as a consumer's queue is), with local shuffles.
      for (int i = 0; i + 8 < frames; i += 8)
        std::shuffle(order.begin() + i, order.begin() + i + 8, rng);
      confirm_settlements run;  // consumer 2 settles by runs of 16
      int in_run = 0;
      for (const int i : order) {
        if (c == 0 && i % 97 == 0) {
          entries[i]->rejected(reject_reason::dropped);
        } else if (c == 2) {
          run.delivered(*entries[i]);
          if (++in_run % 16 == 0) run.flush();
        } else {
          entries[i]->delivered();
        }
      }
    });
  }
  std::uint64_t confirmed = 0;
  int rejects = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (confirmed < frames && std::chrono::steady_clock::now() < until) {
    {
      std::unique_lock lock(o->m);
      if (!o->cv.wait_until(lock, until, [&] { return o->due; })) break;
      o->due = false;
    }
    if (const auto n = ledger->advance([&](std::uint64_t, reject_reason) { ++rejects; }))
      confirmed = *n;
  }
  for (auto& t : threads)
    t.join();
  BOOST_TEST(confirmed == std::uint64_t{frames});
  BOOST_TEST(rejects == (frames + 96) / 97);
}

// Settled by runs (a written batch), the entries of a block give its holds back at once when the
// run moves on or is flushed: until then those holds keep the block, and the ledger, alive
// after the owner let go; rejects keep their reasons; the owner is woken.
BOOST_AUTO_TEST_CASE(a_run_of_settlements_holds_its_block_until_it_is_flushed) {
  gatewayd::runtime::byte_budget budget;
  fixture f;
  f.ledger = confirm_ledger::make(f.o, 1u << 20, &budget);
  std::vector<confirm_entry*> e;
  for (std::size_t i = 0; i < 3 * confirm_ledger::block_entries + 10; ++i)
    e.push_back(f.ledger->add(1));
  {
    confirm_settlements run;
    for (std::size_t i = 0; i < e.size(); ++i) {
      if (i == 70) {
        run.given_up(*e[i], reject_reason::dropped);
      } else {
        run.delivered(*e[i]);
      }
    }
    BOOST_TEST(f.o->wakes.load() >= 1);  // the first three blocks' runs are flushed
    const auto upto = f.advance();
    BOOST_TEST(upto.has_value());
    BOOST_TEST(f.rejects.size() == 1u);
    BOOST_TEST(f.rejects.at(0).first == 71u);
    BOOST_TEST((f.rejects.at(0).second == reject_reason::dropped));
    f.ledger.reset();  // the connection closes with the last run not yet flushed
    BOOST_TEST(budget.used() == confirm_ledger::closed_bytes() +
                                    confirm_ledger::block_bytes(confirm_ledger::block_entries));
  }
  BOOST_TEST(budget.used() == 0u);  // the flush freed the last block, and with it the anchor
}

// The owner may go first (its connection closed): the consumers still settle what they hold,
// the last one frees the ledger (LeakSanitizer checks it; the budget it drew on shows it in any
// build), and nobody is woken any more.
BOOST_AUTO_TEST_CASE(a_ledger_outlives_its_owner_while_frames_are_owed) {
  gatewayd::runtime::byte_budget budget;
  auto o = std::make_shared<owner>();
  auto ledger = confirm_ledger::make(o, 100, &budget);
  confirm_entry* a = ledger->add(2);
  confirm_entry* b = ledger->add(1);
  ledger.reset();
  o.reset();
  a->delivered();
  b->rejected(reject_reason::removed);
  BOOST_TEST(budget.used() > 0u);  // `a` still owes a delivery: the ledger is held
  a->delivered();                  // the last holder: the ledger goes
  BOOST_TEST(budget.used() == 0u);
}

// The owner closes (its connection ends) while consumers' threads are still settling: the
// blocks nobody owes go at the close, the others with their last settlement, each exactly once,
// and what the budget counted comes back to nothing (TSan and LeakSanitizer watch the rest).
BOOST_AUTO_TEST_CASE(an_owner_closing_while_threads_settle_frees_every_block_once) {
  constexpr int frames = 50'000;
  constexpr int consumers = 2;
  gatewayd::runtime::byte_budget budget;
  auto o = std::make_shared<owner>();
  auto ledger = confirm_ledger::make(o, 2 * frames, &budget);
  std::vector<confirm_entry*> entries;
  for (int i = 0; i < frames; ++i) {
    entries.push_back(ledger->add(consumers));
    if (i % 7 == 0) ledger->reject_at_read(reject_reason::unroutable);
  }
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      started.fetch_add(1);
      for (int i = 0; i < frames; ++i) {
        if (c == 1 && i % 1000 == 0) {
          entries[i]->left_unsettled();
        } else {
          entries[i]->delivered();
        }
      }
    });
  }
  while (started.load() < consumers)
    std::this_thread::yield();
  for (int i = 0; i < 3; ++i)
    ledger->advance([](std::uint64_t, reject_reason) {});
  ledger.reset();  // mid-way, most likely
  for (auto& t : threads)
    t.join();
  BOOST_TEST(budget.used() == 0u);
}
