#include <boost/test/unit_test.hpp>

#include <string>

#include "protocol/frame_codec.hpp"

using namespace gatewayd::protocol;
using status = parse_result::status;

namespace {

std::string header(unsigned a_hi, unsigned a_lo, std::uint32_t p, unsigned char flags = 0) {
  std::string h = {char(0x47), char(0x57), char(0x01), char(flags), char(a_hi), char(a_lo)};
  h += char(p >> 24);
  h += char((p >> 16) & 0xff);
  h += char((p >> 8) & 0xff);
  h += char(p & 0xff);
  return h;
}

parse_result expect_error(const std::string& bytes, frame_error e, std::size_t offset,
                          std::uint32_t max_payload = default_max_payload) {
  const auto r = parse_frame(bytes, max_payload);
  BOOST_TEST(int(r.state) == int(status::error));
  BOOST_TEST(to_string(r.error) == to_string(e));
  BOOST_TEST(r.error_offset == offset);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(encodes_the_documented_layout) {
  const std::string f = encode_frame("orders.eu.created", "hello");
  BOOST_TEST(f.size() == header_size + 17 + 5);
  BOOST_TEST(f.substr(0, header_size) == header(0, 17, 5));
  BOOST_TEST(f.substr(header_size, 17) == "orders.eu.created");
  BOOST_TEST(f.substr(header_size + 17) == "hello");
}

BOOST_AUTO_TEST_CASE(parses_a_whole_frame_into_views_of_the_buffer) {
  const std::string f = encode_frame("a.b", "xyz");
  const auto r = parse_frame(f, default_max_payload);
  BOOST_TEST(int(r.state) == int(status::frame));
  BOOST_TEST(r.frame.address == "a.b");
  BOOST_TEST(r.frame.payload == "xyz");
  BOOST_TEST(r.frame.bytes.data() == f.data());
  BOOST_TEST(r.frame.bytes.size() == f.size());
}

BOOST_AUTO_TEST_CASE(address_length_boundaries) {
  const std::string one(1, 'a');
  const std::string max(255, 'z');
  BOOST_TEST(int(parse_frame(encode_frame(one, ""), 16).state) == int(status::frame));
  const auto r = parse_frame(encode_frame(max, "p"), 16);
  BOOST_TEST(int(r.state) == int(status::frame));
  BOOST_TEST(r.frame.address.size() == 255u);
  expect_error(header(0, 0, 0), frame_error::empty_address, 4);
  expect_error(header(1, 0, 0), frame_error::address_too_long, 4);
  BOOST_CHECK_THROW(encode_frame(std::string(256, 'a'), ""), std::invalid_argument);
  BOOST_CHECK_THROW(encode_frame("", ""), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(payload_length_boundaries) {
  constexpr std::uint32_t max_payload = 4096;
  BOOST_TEST(int(parse_frame(encode_frame("a", ""), max_payload).state) == int(status::frame));
  const auto at_max = parse_frame(encode_frame("a", std::string(max_payload, 'x')), max_payload);
  BOOST_TEST(int(at_max.state) == int(status::frame));
  BOOST_TEST(at_max.frame.payload.size() == max_payload);
  // One byte over is refused from the header alone, before any payload byte arrives.
  expect_error(header(0, 1, max_payload + 1), frame_error::payload_too_large, 6, max_payload);
  // A header announcing 4 GiB is refused the same way.
  expect_error(header(0, 1, 0xffffffffu), frame_error::payload_too_large, 6, max_payload);
}

BOOST_AUTO_TEST_CASE(every_fixed_field_error_is_found_as_soon_as_its_byte_arrives) {
  expect_error("X", frame_error::bad_magic, 0);
  expect_error("GX", frame_error::bad_magic, 1);
  expect_error(std::string("GW\x02", 3), frame_error::bad_version, 2);
  expect_error(std::string("GW\x01\x01", 4), frame_error::bad_flags, 3);
  expect_error(header(0, 3, 0, 0x80), frame_error::bad_flags, 3);
}

BOOST_AUTO_TEST_CASE(address_alphabet_and_empty_tokens) {
  auto frame_with_address = [](const std::string& a) { return header(0, a.size(), 0) + a; };
  expect_error(frame_with_address("ab c"), frame_error::bad_address, header_size + 2);
  expect_error(frame_with_address(".abc"), frame_error::bad_address, header_size + 0);
  expect_error(frame_with_address("ab..c"), frame_error::bad_address, header_size + 3);
  expect_error(frame_with_address("abc."), frame_error::bad_address, header_size + 3);
  expect_error(frame_with_address("a*b"), frame_error::bad_address, header_size + 1);
  expect_error(frame_with_address("a>"), frame_error::bad_address, header_size + 1);
  expect_error(frame_with_address(std::string("a\0", 2)), frame_error::bad_address,
               header_size + 1);
  const auto ok = parse_frame(frame_with_address("Az09_-.x"), 16);
  BOOST_TEST(int(ok.state) == int(status::frame));
  BOOST_TEST(valid_address("orders.eu-1.created_2"));
  BOOST_TEST(!valid_address(""));
  BOOST_TEST(!valid_address("a."));
  BOOST_TEST(!valid_address(std::string(256, 'a')));
}

BOOST_AUTO_TEST_CASE(need_more_reports_what_the_frame_needs) {
  const std::string f = encode_frame("orders.x", std::string(100, 'p'));
  for (std::size_t n = 0; n < f.size(); ++n) {
    const auto r = parse_frame(std::string_view(f).substr(0, n), default_max_payload);
    BOOST_TEST_REQUIRE(int(r.state) == int(status::need_more));
    BOOST_TEST(r.needed == (n < header_size ? header_size : f.size()));
  }
}

BOOST_AUTO_TEST_CASE(error_names_are_the_metric_labels) {
  BOOST_TEST(to_string(frame_error::bad_magic) == "bad_magic");
  BOOST_TEST(to_string(frame_error::bad_version) == "bad_version");
  BOOST_TEST(to_string(frame_error::bad_flags) == "bad_flags");
  BOOST_TEST(to_string(frame_error::empty_address) == "empty_address");
  BOOST_TEST(to_string(frame_error::address_too_long) == "address_too_long");
  BOOST_TEST(to_string(frame_error::bad_address) == "bad_address");
  BOOST_TEST(to_string(frame_error::payload_too_large) == "payload_too_large");
}

// Byte 3: each reader accepts the flags its side of the protocol defines and nothing else.
BOOST_AUTO_TEST_CASE(each_reader_accepts_only_its_flags) {
  const std::string confirm = encode_frame("a.b", "x", frame_flags::confirm);
  const std::string control = encode_frame("ack", std::string(8, '\0'), frame_flags::control);
  // A supplier may ask for a confirmation; a consumer never receives one (the bit is cleared).
  const auto supplier = parse_frame(confirm, default_max_payload, supplier_frames);
  BOOST_TEST(int(supplier.state) == int(status::frame));
  BOOST_TEST(supplier.frame.flags == frame_flags::confirm);
  BOOST_TEST(supplier.frame.address == "a.b");
  expect_error(confirm, frame_error::bad_flags, 3);  // data_frames, the default
  // Control messages only where control messages go: never routed.
  const auto as_supplier = parse_frame(control, default_max_payload, supplier_frames);
  BOOST_TEST(int(as_supplier.state) == int(status::error));
  BOOST_TEST(as_supplier.error_offset == 3u);
  const auto ack = parse_frame(control, default_max_payload, control_frames);
  BOOST_TEST(int(ack.state) == int(status::frame));
  BOOST_TEST(ack.frame.flags == frame_flags::control);
  BOOST_TEST(int(parse_frame(encode_frame("a", ""), default_max_payload, control_frames).state) ==
             int(status::error));
  // Undefined values are refused everywhere, after the fourth byte.
  for (const unsigned char flags : {0x02, 0x40, 0x81, 0xff}) {
    for (const flag_policy p : {supplier_frames, data_frames, control_frames}) {
      const auto r = parse_frame(header(0, 1, 0, flags).substr(0, 4), default_max_payload, p);
      BOOST_TEST(int(r.state) == int(status::error));
    }
  }
}

// A CONFIRM frame is forwarded as a data frame: the bit is cleared in place, and every other
// byte stays the supplier's.
BOOST_AUTO_TEST_CASE(a_confirm_frame_with_its_flag_cleared_is_the_data_frame) {
  std::string frame = encode_frame("a.b", "payload", frame_flags::confirm);
  clear_confirm_flag(frame.data());
  BOOST_TEST(frame == encode_frame("a.b", "payload"));
  const auto r = parse_frame(frame, default_max_payload, data_frames);
  BOOST_TEST(int(r.state) == int(status::frame));
  BOOST_TEST(r.frame.flags == frame_flags::data);
}
