// traffic::confirm_window: a confirm-mode supplier's unsettled frames, checked against the
// contract's confirms and rejects ("Confirms and acknowledgements"), with no sockets.
#include "tools/traffic/confirm_window.hpp"

#include <boost/test/unit_test.hpp>

using namespace gatewayd;
using traffic::confirm_fault;
using kind = protocol::control_message::kind;

namespace {

traffic::payload_header frame(std::uint64_t sequence) {
  return {1, sequence, 0, 9};
}
protocol::control_message confirm(std::uint64_t n) {
  return {kind::confirm, n, {}};
}
protocol::control_message reject(std::uint64_t n, protocol::reject_reason r) {
  return {kind::reject, n, r};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cumulative_confirm_frees_room_in_order) {
  traffic::confirm_window w(3);
  for (std::uint64_t s = 0; s < 3; ++s)
    w.add(frame(s));
  BOOST_TEST(w.room() == 0u);
  BOOST_TEST((w.on_message(confirm(2)) == confirm_fault::none));
  BOOST_TEST(w.room() == 2u);
  BOOST_TEST(w.confirmed() == 2u);
  BOOST_TEST((w.on_message(confirm(2)) == confirm_fault::none));  // the same N again: fine
  BOOST_TEST(w.unsettled() == 1u);
  w.add(frame(3));
  w.add(frame(4));
  BOOST_TEST((w.on_message(confirm(5)) == confirm_fault::none));
  BOOST_TEST(w.held() == 0u);
  BOOST_TEST(w.confirmed() == 5u);
}

BOOST_AUTO_TEST_CASE(a_rejected_frame_is_counted_by_reason_and_never_resent) {
  traffic::confirm_window w(4);
  for (std::uint64_t s = 0; s < 4; ++s)
    w.add(frame(s));
  BOOST_TEST((w.on_message(reject(2, protocol::reject_reason::unroutable)) == confirm_fault::none));
  BOOST_TEST((w.on_message(reject(3, protocol::reject_reason::removed)) == confirm_fault::none));
  BOOST_TEST(w.unsettled() == 2u);
  BOOST_TEST((w.on_message(confirm(1)) == confirm_fault::none));
  // The connection ends with frames 2, 3 and 4 (sequences 1..3) not covered by a confirm: the
  // rejected two are settled, only frame 4 goes again, numbered 1 on the next connection.
  w.new_connection();
  BOOST_TEST(w.to_resend() == 1u);
  BOOST_TEST(w.resend_at(0).sequence == 3u);
  BOOST_TEST(w.room() == 3u);
  w.resent(1);
  BOOST_TEST((w.on_message(confirm(2)) == confirm_fault::confirm_ahead));
  BOOST_TEST((w.on_message(confirm(1)) == confirm_fault::none));
  BOOST_TEST(w.held() == 0u);
  BOOST_TEST(w.confirmed() == 2u);
  BOOST_TEST(w.rejected() == 2u);
  BOOST_TEST(w.resends() == 1u);
  BOOST_TEST(w.rejected_by_reason()[0] == 0u);
  BOOST_TEST(w.rejected_by_reason()[1] == 1u);  // unroutable
  BOOST_TEST(w.rejected_by_reason()[3] == 1u);  // removed
}

BOOST_AUTO_TEST_CASE(messages_that_break_the_contract_are_faults) {
  traffic::confirm_window w(8);
  for (std::uint64_t s = 0; s < 4; ++s)
    w.add(frame(s));
  BOOST_TEST((w.on_message(confirm(5)) == confirm_fault::confirm_ahead));
  BOOST_TEST((w.on_message(confirm(2)) == confirm_fault::none));
  BOOST_TEST((w.on_message(confirm(1)) == confirm_fault::confirm_went_back));
  BOOST_TEST((w.on_message(reject(2, protocol::reject_reason::dropped)) ==
              confirm_fault::reject_out_of_range));
  BOOST_TEST((w.on_message(reject(5, protocol::reject_reason::dropped)) ==
              confirm_fault::reject_out_of_range));
  BOOST_TEST((w.on_message(reject(3, protocol::reject_reason::dropped)) == confirm_fault::none));
  BOOST_TEST(
      (w.on_message(reject(3, protocol::reject_reason::removed)) == confirm_fault::rejected_twice));
  BOOST_TEST((w.on_message({kind::ack, 1, {}}) == confirm_fault::not_for_a_supplier));
}
