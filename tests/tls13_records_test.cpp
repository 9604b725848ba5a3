// tls13_records between two of its own ends on the same secrets: the pieces come out byte for
// byte in records of 16 KiB, and anything that is not the next record as sealed (a flipped
// bit, a replay, a reorder, an oversized length) fails before its plaintext is used.
// Interoperation with OpenSSL's TLS, key updates included, is tls_channel_test's.
#define BOOST_TEST_MODULE tls13_records
#include <boost/test/unit_test.hpp>

#include <openssl/ssl.h>

#include <asio/error.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "net/tls13_records.hpp"

using namespace gatewayd;
using net::tls13_records;

namespace {

constexpr std::uint16_t suites[] = {0x1301, 0x1302, 0x1303};

std::size_t secret_size(std::uint16_t suite) {
  return suite == 0x1302 ? 48 : 32;
}

void fill(net::traffic_secret& s, unsigned char seed, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i)
    s.bytes[i] = static_cast<unsigned char>(seed + 7 * i);
  s.size = size;
}

// Two ends of one connection: what `sender` seals `receiver` opens.
struct ends {
  std::unique_ptr<tls13_records> sender;
  std::unique_ptr<tls13_records> receiver;

  explicit ends(std::uint16_t suite) {
    net::traffic_secret a, b;
    fill(a, 1, secret_size(suite));
    fill(b, 99, secret_size(suite));
    sender = tls13_records::make(suite, b, a, true);
    receiver = tls13_records::make(suite, a, b, true);
  }
};

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(i * 131 + i / 251);
  return s;
}

// Opens every record of `wire`; the plaintext, and how many records there were. Stops at the
// first error, into `ec`.
std::string open_all(tls13_records& r, const std::string& wire, std::size_t& records,
                     std::error_code& ec) {
  std::string plain;
  records = 0;
  for (std::size_t at = 0; at < wire.size() && !ec;) {
    const std::size_t size = tls13_records::record_size(wire.data() + at, wire.size() - at, ec);
    if (ec) break;
    if (!size || size > wire.size() - at) {  // a length that runs past what was sent
      ec = std::make_error_code(std::errc::message_size);
      break;
    }
    std::vector<char> into(size - tls13_records::header_size - tls13_records::tag_size);
    const std::size_t n = r.open(wire.data() + at, size, into.data(), ec);
    if (!ec) plain.append(into.data(), n);
    at += size;
    ++records;
  }
  return plain;
}

std::string sealed(tls13_records& r, const std::string& data, std::vector<std::size_t> cuts) {
  std::vector<asio::const_buffer> pieces;
  std::size_t at = 0;
  for (std::size_t cut : cuts) {
    pieces.emplace_back(data.data() + at, cut);
    at += cut;
  }
  pieces.emplace_back(data.data() + at, data.size() - at);
  net::byte_buffer out;
  std::error_code ec;
  r.seal(pieces, out, ec);
  BOOST_TEST_REQUIRE(!ec, ec.message());
  return std::string(out.data(), out.size());
}

}  // namespace

BOOST_AUTO_TEST_CASE(pieces_come_out_byte_for_byte_in_records_of_16_kib) {
  for (const std::uint16_t suite : suites) {
    BOOST_TEST_CONTEXT("suite 0x" << std::hex << suite) {
      ends e(suite);
      BOOST_TEST_REQUIRE(e.sender != nullptr);
      const std::string data = pattern(40'000);
      const std::string wire = sealed(*e.sender, data, {1, 150, 16'383, 3, 20'000});
      // 16,384 + 16,384 + 7,232 bytes of content, each with a type byte and a tag.
      BOOST_TEST(wire.size() == data.size() + 3 * (5 + 1 + 16));
      std::size_t records = 0;
      std::error_code ec;
      const std::string plain = open_all(*e.receiver, wire, records, ec);
      BOOST_TEST(!ec, ec.message());
      BOOST_TEST(records == 3u);
      BOOST_TEST((plain == data));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_anywhere_fails_the_record) {
  const std::string data = pattern(1'000);
  const std::size_t size = 5 + data.size() + 1 + 16;
  for (const std::size_t at : {std::size_t{0}, std::size_t{2}, std::size_t{3}, std::size_t{4},
                               std::size_t{5}, std::size_t{500}, size - 17, size - 16, size - 1}) {
    BOOST_TEST_CONTEXT("byte " << at) {
      ends e(0x1301);
      std::string wire = sealed(*e.sender, data, {});
      BOOST_TEST_REQUIRE(wire.size() == size);
      wire[at] = static_cast<char>(wire[at] ^ 0x10);
      std::size_t records = 0;
      std::error_code ec;
      const std::string plain = open_all(*e.receiver, wire, records, ec);
      BOOST_TEST(static_cast<bool>(ec));
      BOOST_TEST(ec != asio::error::eof);
      BOOST_TEST(plain.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_replayed_or_reordered_record_fails) {
  ends e(0x1302);
  const std::string first = sealed(*e.sender, pattern(100), {});
  const std::string second = sealed(*e.sender, pattern(200), {});
  std::size_t records = 0;
  std::error_code ec;
  open_all(*e.receiver, second, records, ec);  // the second record where the first belongs
  BOOST_TEST(static_cast<bool>(ec));

  ends f(0x1302);
  const std::string once = sealed(*f.sender, pattern(100), {});
  ec = {};
  BOOST_TEST((open_all(*f.receiver, once, records, ec) == pattern(100)));
  BOOST_TEST_REQUIRE(!ec);
  open_all(*f.receiver, once, records, ec);  // the same record again
  BOOST_TEST(static_cast<bool>(ec));
}

BOOST_AUTO_TEST_CASE(close_notify_reads_as_the_end_of_the_stream) {
  ends e(0x1303);
  net::byte_buffer out;
  std::error_code ec;
  e.sender->seal_close_notify(out, ec);
  BOOST_TEST_REQUIRE(!ec);
  std::size_t records = 0;
  const std::string plain = open_all(*e.receiver, std::string(out.data(), out.size()), records, ec);
  BOOST_TEST((ec == asio::error::eof));
  BOOST_TEST(plain.empty());
}

BOOST_AUTO_TEST_CASE(a_header_is_judged_before_anything_is_decrypted) {
  std::error_code ec;
  const auto size_of = [&](std::string header) {
    ec = {};
    return tls13_records::record_size(header.data(), header.size(), ec);
  };
  BOOST_TEST(size_of(std::string("\x17\x03\x03\x00", 4)) == 0u);  // not all there yet
  BOOST_TEST(!ec);
  BOOST_TEST(size_of(std::string("\x17\x03\x03\x40\x11", 5)) == 5u + 16'401u);
  BOOST_TEST(!ec);
  size_of(std::string("\x17\x03\x03\x40\x12", 5));  // inner plaintext over 2^14 + 1
  BOOST_TEST(static_cast<bool>(ec));
  size_of(std::string("\x17\x03\x03\x00\x10", 5));  // a tag and nothing else
  BOOST_TEST(static_cast<bool>(ec));
  size_of(std::string("\x16\x03\x03\x00\x40", 5));  // a plaintext handshake record
  BOOST_TEST(static_cast<bool>(ec));
  size_of(std::string("\x17\x03\x01\x00\x40", 5));
  BOOST_TEST(static_cast<bool>(ec));
}

BOOST_AUTO_TEST_CASE(only_tls13s_three_suites_with_their_secret_sizes_are_taken) {
  net::traffic_secret s32, s48;
  fill(s32, 3, 32);
  fill(s48, 4, 48);
  BOOST_TEST(tls13_records::make(std::uint16_t{0x1301}, s32, s32, true) != nullptr);
  BOOST_TEST(tls13_records::make(std::uint16_t{0x1302}, s48, s48, true) != nullptr);
  BOOST_TEST(tls13_records::make(std::uint16_t{0x1302}, s32, s32, true) == nullptr);
  BOOST_TEST(tls13_records::make(std::uint16_t{0x1304}, s32, s32, true) == nullptr);  // CCM
  BOOST_TEST(tls13_records::make(std::uint16_t{0xc02f}, s32, s32, true) ==
             nullptr);  // a TLS 1.2 suite
}

BOOST_AUTO_TEST_CASE(a_key_log_secret_is_read_from_its_hex) {
  net::traffic_secret s;
  BOOST_TEST(s.assign_hex(std::string(64, 'a')));
  BOOST_TEST(s.size == 32u);
  BOOST_TEST(s.bytes[0] == 0xaa);
  BOOST_TEST(!s.assign_hex(std::string(63, 'a')));
  BOOST_TEST(!s.assign_hex(std::string(63, 'a') + "g"));
  BOOST_TEST(s.size == 0u);
}

BOOST_AUTO_TEST_CASE(a_requested_key_update_is_answered_before_the_next_data) {
  ends e(0x1301);
  // The sender asks for an update (its own key change is not the point here).
  net::byte_buffer ask;
  std::error_code ec;
  static constexpr char key_update_requested[] = {24, 0, 0, 1, 1};
  e.sender->seal_one(22, asio::buffer(key_update_requested), ask, ec);
  BOOST_TEST_REQUIRE(!ec);
  std::size_t records = 0;
  BOOST_TEST(open_all(*e.receiver, std::string(ask.data(), ask.size()), records, ec).empty());
  BOOST_TEST_REQUIRE(!ec, ec.message());
  BOOST_TEST(e.receiver->key_update_owed());

  // The receiver's next data comes after its own KeyUpdate, under its next key: the sender
  // reads both only if both are right.
  const std::string data = pattern(500);
  const std::string wire = sealed(*e.receiver, data, {});
  BOOST_TEST(!e.receiver->key_update_owed());
  const std::string plain = open_all(*e.sender, wire, records, ec);
  BOOST_TEST(!ec, ec.message());
  BOOST_TEST(records == 2u);  // the KeyUpdate, then the data
  BOOST_TEST((plain == data));
}
