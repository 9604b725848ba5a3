// The notifier's waiting state messages: kept in order, and past the cap folded so that what
// stays is still the order they were said in and the newest state is never lost.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "gateway/notify_backlog.hpp"

using gatewayd::gateway::notify_backlog;
using kind = notify_backlog::kind;

namespace {

std::vector<std::string> drain(notify_backlog& b) {
  std::vector<std::string> out;
  while (!b.empty()) {
    out.push_back(b.front().text);
    b.pop_front();
  }
  return out;
}

// The number after the word: when it was said.
int number(const std::string& text) {
  return std::stoi(text.substr(text.find(' ') + 1));
}

}  // namespace

BOOST_AUTO_TEST_CASE(up_to_the_cap_every_message_waits_in_order) {
  notify_backlog b;
  const std::vector<std::string> said{"READY 0", "RELOADING 1", "READY 1",    "RELOADING 2",
                                      "READY 2", "STOPPING a",  "STOPPING b", "STATUS"};
  const kind kinds[] = {kind::ready, kind::reloading, kind::ready,    kind::reloading,
                        kind::ready, kind::stopping,  kind::stopping, kind::status};
  static_assert(notify_backlog::max_pending == 8);
  for (std::size_t i = 0; i < said.size(); ++i)
    BOOST_TEST(b.push({kinds[i], said[i]}) == 0u);
  BOOST_TEST(b.size() == 8u);
  BOOST_TEST(drain(b) == said, boost::test_tools::per_element());
}

// PID 1 reads nothing through many reloads: the reloads that began and ended unseen fold away
// whole, start-up's READY and the reload still under way stay.
BOOST_AUTO_TEST_CASE(finished_reloads_fold_away_in_pairs) {
  notify_backlog b;
  std::size_t folded = 0;
  folded += b.push({kind::ready, "READY 0"});
  for (int i = 1; i <= 10; ++i) {
    folded += b.push({kind::reloading, "RELOADING " + std::to_string(i)});
    folded += b.push({kind::ready, "READY " + std::to_string(i)});
  }
  folded += b.push({kind::reloading, "RELOADING 11"});
  BOOST_TEST(b.size() <= notify_backlog::max_pending);
  BOOST_TEST(folded + b.size() == 22u);  // every message either waits or was folded
  const auto left = drain(b);
  BOOST_TEST_REQUIRE(left.size() >= 2u);
  BOOST_TEST(left.front() == "READY 0");
  BOOST_TEST(left.back() == "RELOADING 11");  // the state now
  // What stays is in the order it was said, and in pairs: no READY lost from its RELOADING.
  for (std::size_t i = 1; i + 1 < left.size(); i += 2) {
    BOOST_TEST(left[i].substr(0, 9) == "RELOADING");
    BOOST_TEST(left[i + 1] == "READY" + left[i].substr(9));
  }
  for (std::size_t i = 1; i < left.size(); ++i)
    BOOST_TEST(number(left[i - 1]) <= number(left[i]), left[i - 1] << " before " << left[i]);
}

BOOST_AUTO_TEST_CASE(an_older_message_of_a_kind_gives_way_to_a_newer_one) {
  notify_backlog b;
  for (int i = 0; i < 12; ++i)
    b.push({kind::stopping, "STOPPING " + std::to_string(i)});
  b.push({kind::status, "STATUS x"});
  BOOST_TEST(b.size() <= notify_backlog::max_pending);
  const auto left = drain(b);
  BOOST_TEST(left.back() == "STATUS x");
  BOOST_TEST(left[left.size() - 2] == "STOPPING 11");  // the newest of its kind stays
  for (std::size_t i = 1; i + 1 < left.size(); ++i)
    BOOST_TEST(number(left[i - 1]) < number(left[i]));
}

// Whatever is said, the bound holds and the newest message is the last one waiting.
BOOST_AUTO_TEST_CASE(the_bound_holds_for_any_sequence) {
  notify_backlog b;
  const kind kinds[] = {kind::ready, kind::reloading, kind::stopping, kind::status};
  unsigned seed = 7;
  for (int i = 0; i < 1000; ++i) {
    seed = seed * 1103515245u + 12345u;
    const std::string text = std::to_string(i);
    b.push({kinds[(seed >> 16) % 4], text});
    BOOST_TEST_REQUIRE(b.size() <= notify_backlog::max_pending);
  }
  std::string last;
  int previous = -1;
  while (!b.empty()) {
    const int n = std::stoi(b.front().text);
    BOOST_TEST(n > previous);  // never reordered
    previous = n;
    last = b.front().text;
    b.pop_front();
  }
  BOOST_TEST(last == "999");
}
