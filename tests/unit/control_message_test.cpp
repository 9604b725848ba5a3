// The control messages of confirms and acks: the documented bytes, a round trip for each, and
// every malformed shape refused with its reason.
#include <boost/test/unit_test.hpp>

#include <string>

#include "protocol/control_message.hpp"

using namespace gatewayd::protocol;
using kind = control_message::kind;

namespace {

control_parse parse(const std::string& frame) {
  const auto r = parse_frame(frame, default_max_payload, control_frames);
  BOOST_TEST_REQUIRE(int(r.state) == int(parse_result::status::frame));
  return parse_control(r.frame);
}

std::string encoded(const control_message& m) {
  std::string s;
  append_control(s, m);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_documented_bytes) {
  // confirm N=258: header (flags 0x80, address length 7, payload length 8), "confirm", N.
  const std::string confirm = encoded({kind::confirm, 258});
  BOOST_TEST(confirm == std::string("GW\x01\x80\x00\x07\x00\x00\x00\x08", 10) + "confirm" +
                            std::string("\0\0\0\0\0\0\x01\x02", 8));
  BOOST_TEST(confirm.size() == confirm_size);
  const std::string reject = encoded({kind::reject, 7, reject_reason::not_permitted});
  BOOST_TEST(reject == std::string("GW\x01\x80\x00\x06\x00\x00\x00\x09", 10) + "reject" +
                           std::string("\0\0\0\0\0\0\0\x07\x03", 9));
  BOOST_TEST(reject.size() == reject_size);
  const std::string ack = encoded({kind::ack, 1});
  BOOST_TEST(ack == std::string("GW\x01\x80\x00\x03\x00\x00\x00\x08", 10) + "ack" +
                        std::string("\0\0\0\0\0\0\0\x01", 8));
  BOOST_TEST(ack.size() == ack_size);
  BOOST_TEST(max_control_size >= reject_size);
}

BOOST_AUTO_TEST_CASE(every_message_round_trips) {
  const control_message all[] = {{kind::confirm, 0},
                                 {kind::confirm, ~std::uint64_t{0}},
                                 {kind::ack, 42},
                                 {kind::reject, 1, reject_reason::dropped},
                                 {kind::reject, 2, reject_reason::unroutable},
                                 {kind::reject, 3, reject_reason::not_permitted},
                                 {kind::reject, 1ull << 40, reject_reason::removed}};
  for (const auto& m : all) {
    const auto r = parse(encoded(m));
    BOOST_TEST_REQUIRE(r.message.has_value(), to_string(r.error));
    BOOST_TEST((*r.message == m));
  }
}

BOOST_AUTO_TEST_CASE(malformed_messages_are_refused_with_their_reason) {
  const auto error_of = [](const std::string& address, const std::string& payload) {
    return to_string(parse(encode_frame(address, payload, frame_flags::control)).error);
  };
  BOOST_TEST(error_of("nack", std::string(8, '\0')) == "unknown_message");
  BOOST_TEST(error_of("confirm.x", std::string(8, '\0')) == "unknown_message");
  BOOST_TEST(error_of("confirm", std::string(7, '\0')) == "bad_length");
  BOOST_TEST(error_of("ack", std::string(9, '\0')) == "bad_length");
  BOOST_TEST(error_of("reject", std::string(8, '\0')) == "bad_length");
  BOOST_TEST(error_of("reject", std::string(8, '\0') + '\x00') == "bad_reason");
  BOOST_TEST(error_of("reject", std::string(8, '\0') + '\x05') == "bad_reason");
  // A data frame named like a message is not one.
  const std::string data = encode_frame("ack", std::string(8, '\0'));
  const auto r = parse_frame(data, default_max_payload, data_frames);
  BOOST_TEST(to_string(parse_control(r.frame).error) == "not_control");
}
