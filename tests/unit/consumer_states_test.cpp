// The consumer's asserted transition tables, held to the ones their headers write down: the
// link's state (consumer_link.hpp) and the consumer's end (`life`, consumer_closing.hpp). Every
// pair is asked, so a transition the table lets through that the comment does not list fails here
// too.
#include <boost/test/unit_test.hpp>

#include <array>
#include <set>
#include <string_view>
#include <utility>

#include "consumers/consumer_closing.hpp"
#include "consumers/consumer_link.hpp"

namespace gc = gatewayd::consumers;

namespace {

// Every (from, to) of an enum of N states (0..N-1, named by `names`), asked of `may_enter`:
// allowed exactly when `legal` lists it.
template <class State, std::size_t N>
void holds_to(bool (*may_enter)(State, State), const std::set<std::pair<State, State>>& legal,
              const std::array<std::string_view, N>& names) {
  for (std::size_t f = 0; f < N; ++f) {
    for (std::size_t t = 0; t < N; ++t) {
      const auto from = static_cast<State>(f);
      const auto to = static_cast<State>(t);
      BOOST_TEST(may_enter(from, to) == legal.contains({from, to}),
                 names[f] << " -> " << names[t] << " should be "
                          << (legal.contains({from, to}) ? "allowed" : "refused"));
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_link_moves_only_as_its_table_says) {
  using s = gc::consumer_link::state;
  const std::set<std::pair<s, s>> legal{
      {s::idle, s::dialing},
      {s::idle, s::backing_off},
      {s::idle, s::shut},
      {s::dialing, s::handshaking},
      {s::dialing, s::up},
      {s::dialing, s::backing_off},
      {s::dialing, s::dialing},
      {s::dialing, s::shut},
      {s::handshaking, s::vetting},
      {s::handshaking, s::up},
      {s::handshaking, s::backing_off},
      {s::handshaking, s::dialing},
      {s::handshaking, s::shut},
      {s::vetting, s::up},
      {s::vetting, s::backing_off},
      {s::vetting, s::dialing},
      {s::vetting, s::shut},
      {s::up, s::backing_off},
      {s::up, s::shut},
      {s::backing_off, s::dialing},
      {s::backing_off, s::backing_off},
      {s::backing_off, s::shut},
  };
  holds_to(&gc::consumer_link::may_enter, legal,
           std::array<std::string_view, 7>{"idle", "dialing", "handshaking", "vetting", "up",
                                           "backing_off", "shut"});
}

// The ones a slip would most likely make: up without a dial, a dial out of the end, a
// connection up again without going down first.
BOOST_AUTO_TEST_CASE(the_link_refuses_the_shortcuts) {
  using s = gc::consumer_link::state;
  BOOST_TEST(!gc::consumer_link::may_enter(s::idle, s::up));
  BOOST_TEST(!gc::consumer_link::may_enter(s::backing_off, s::up));
  BOOST_TEST(!gc::consumer_link::may_enter(s::up, s::up));
  BOOST_TEST(!gc::consumer_link::may_enter(s::up, s::dialing));
  BOOST_TEST(!gc::consumer_link::may_enter(s::shut, s::dialing));
  BOOST_TEST(!gc::consumer_link::may_enter(s::shut, s::shut));
  BOOST_TEST(!gc::consumer_link::may_enter(s::dialing, s::vetting));
}

BOOST_AUTO_TEST_CASE(a_consumer_ends_forward_only_one_step_at_a_time) {
  using l = gc::consumer_closing::life;
  const std::set<std::pair<l, l>> legal{
      {l::open, l::draining}, {l::draining, l::closed}, {l::closed, l::done}};
  holds_to(&gc::consumer_closing::may_enter, legal,
           std::array<std::string_view, 4>{"open", "draining", "closed", "done"});
  BOOST_TEST(!gc::consumer_closing::may_enter(l::open, l::closed));  // a close with no drain begun
  BOOST_TEST(!gc::consumer_closing::may_enter(l::done, l::open));
  BOOST_TEST(!gc::consumer_closing::may_enter(l::closed, l::closed));
}
