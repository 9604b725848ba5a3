// The ledger's blocks (issue 42): a connection's first block holds one entry and each next one
// twice as many, up to 64, and an entry carries no number. A closed connection keeps at most 64
// bytes per frame owed when it sent a few; numbers stay right with frames rejected at read
// between entries, across blocks of every size.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <memory>
#include <optional>
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
  confirm_ledger_ptr ledger = confirm_ledger::make(o, 1u << 20);
  std::vector<std::pair<std::uint64_t, reject_reason>> rejects;

  std::optional<std::uint64_t> advance() {
    return ledger->advance([&](std::uint64_t n, reject_reason r) { rejects.emplace_back(n, r); });
  }
};

}  // namespace

// Issue 42: a connection that sends one CONFIRM frame and closes, the frame owed by a consumer
// that is down, keeps at most 64 bytes for it (its anchor and a block of one entry), not a
// 64-entry block and the whole ledger (1,704 bytes before); a few frames keep a few blocks.
BOOST_AUTO_TEST_CASE(a_closed_connection_keeps_at_most_64_bytes_per_frame_owed) {
  gatewayd::runtime::byte_budget budget;
  for (std::size_t sent = 1; sent <= 7; ++sent) {
    auto o = std::make_shared<owner>();
    auto ledger = confirm_ledger::make(o, 1u << 20, &budget);
    std::vector<confirm_entry*> e;
    for (std::size_t i = 0; i < sent; ++i)
      e.push_back(ledger->add(1));
    ledger.reset();
    BOOST_TEST(budget.used() <= 64 * sent, sent << " frames owed: " << budget.used() << " B");
    if (sent == 1) BOOST_TEST(budget.used() <= 64u);
    for (confirm_entry* x : e)
      x->delivered();
    BOOST_TEST(budget.used() == 0u);
  }
}

// Entries carry no number: it follows from their place and the numbers rejected at read between
// them, across blocks of every size.
BOOST_AUTO_TEST_CASE(numbers_stay_right_with_rejects_between_entries_across_blocks) {
  fixture f;
  std::vector<std::pair<std::uint64_t, confirm_entry*>> routed;  // number, entry
  std::uint64_t number = 0;
  for (int i = 0; i < 300; ++i) {
    for (int r = 0; r < i % 3; ++r) {
      BOOST_TEST_REQUIRE(f.ledger->reject_at_read(reject_reason::unroutable));
      ++number;
    }
    routed.emplace_back(++number, f.ledger->add(1));
  }
  f.advance();
  f.rejects.clear();
  // Every routed frame rejected as dropped: each reject names the frame's own number.
  for (auto& [n, entry] : routed)
    entry->rejected(reject_reason::dropped);
  BOOST_TEST(f.advance().value_or(0) == number);
  BOOST_TEST_REQUIRE(f.rejects.size() == routed.size());
  for (std::size_t i = 0; i < routed.size(); ++i)
    BOOST_TEST(f.rejects[i].first == routed[i].first);
}
