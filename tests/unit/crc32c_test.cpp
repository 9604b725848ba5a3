#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "runtime/crc32c.hpp"

using gatewayd::runtime::crc32c;
using gatewayd::runtime::crc32c_hardware;
using gatewayd::runtime::crc32c_portable;

namespace {

std::uint32_t crc_of(std::string_view s) {
  return crc32c(0, s.data(), s.size());
}

std::uint32_t portable_of(std::string_view s) {
  return crc32c_portable(0, s.data(), s.size());
}

}  // namespace

// RFC 3720 B.4 and the usual check value, through both paths.
BOOST_AUTO_TEST_CASE(known_vectors) {
  BOOST_TEST_MESSAGE("crc32c uses the " << (crc32c_hardware() ? "SSE4.2 instruction" : "table"));
  BOOST_TEST(crc_of("123456789") == 0xE3069283u);
  BOOST_TEST(portable_of("123456789") == 0xE3069283u);
  BOOST_TEST(crc_of("") == 0u);
  BOOST_TEST(portable_of("") == 0u);
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xff), up(32), down(32);
  for (unsigned i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  for (auto* f : {&crc32c, &crc32c_portable}) {
    BOOST_TEST(f(0, zeros.data(), 32) == 0x8A9136AAu);
    BOOST_TEST(f(0, ones.data(), 32) == 0x62A8AB43u);
    BOOST_TEST(f(0, up.data(), 32) == 0x46DD794Eu);
    BOOST_TEST(f(0, down.data(), 32) == 0x113FDB5Cu);
  }
}

// Any split of a buffer gives the one-shot value, on both paths.
BOOST_AUTO_TEST_CASE(incremental_equals_one_shot) {
  std::mt19937 rng(46);
  std::vector<unsigned char> buf(1000);
  for (auto& b : buf)
    b = static_cast<unsigned char>(rng());
  const std::uint32_t whole = crc32c(0, buf.data(), buf.size());
  BOOST_TEST(whole == crc32c_portable(0, buf.data(), buf.size()));
  for (std::size_t cut = 0; cut <= buf.size(); cut += 7) {
    const std::uint32_t a = crc32c(0, buf.data(), cut);
    BOOST_TEST(crc32c(a, buf.data() + cut, buf.size() - cut) == whole);
    const std::uint32_t b = crc32c_portable(0, buf.data(), cut);
    BOOST_TEST(crc32c_portable(b, buf.data() + cut, buf.size() - cut) == whole);
  }
  // Three pieces, one of them empty.
  std::uint32_t c = crc32c(0, buf.data(), 333);
  c = crc32c(c, buf.data() + 333, 0);
  BOOST_TEST(crc32c(c, buf.data() + 333, buf.size() - 333) == whole);
}

// The dispatched path (the instruction on this host, when it has it) agrees with the table on
// every length 0..300 from every start offset 0..15 (unaligned loads), and from a non-zero crc.
BOOST_AUTO_TEST_CASE(hardware_equals_portable_on_random_buffers) {
  if (!crc32c_hardware()) BOOST_TEST_MESSAGE("no SSE4.2 here: the table is compared to itself");
  std::mt19937 rng(3720);
  std::vector<unsigned char> buf(300 + 16);
  for (auto& b : buf)
    b = static_cast<unsigned char>(rng());
  std::size_t mismatches = 0;
  for (std::size_t start = 0; start < 16; ++start) {
    for (std::size_t n = 0; n <= 300; ++n) {
      const std::uint32_t seed = start % 2 ? static_cast<std::uint32_t>(rng()) : 0;
      if (crc32c(seed, buf.data() + start, n) != crc32c_portable(seed, buf.data() + start, n))
        ++mismatches;
    }
  }
  BOOST_TEST(mismatches == 0u);
}

// A flipped bit anywhere changes the checksum (what the spool's torn-record check relies on).
BOOST_AUTO_TEST_CASE(a_flipped_bit_changes_the_crc) {
  std::vector<unsigned char> buf(144, 0x5a);
  const std::uint32_t before = crc32c(0, buf.data(), buf.size());
  for (std::size_t i = 0; i < buf.size() * 8; i += 13) {
    buf[i / 8] ^= static_cast<unsigned char>(1u << (i % 8));
    BOOST_TEST(crc32c(0, buf.data(), buf.size()) != before);
    buf[i / 8] ^= static_cast<unsigned char>(1u << (i % 8));
  }
}
