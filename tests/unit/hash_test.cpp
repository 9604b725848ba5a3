// The word-wise byte compares the parser and the route cache lean on, against a byte loop: every
// length up to a few words, a difference at every position (or none), at every alignment.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <string>

#include "runtime/hash.hpp"

using namespace gatewayd::runtime;

BOOST_AUTO_TEST_CASE(word_compares_find_the_first_difference_a_byte_loop_finds) {
  char a[64 + 8];
  char b[64 + 8];
  std::size_t cases = 0;
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t n = 0; n <= 40; ++n) {
      for (std::size_t diff = 0; diff <= n; ++diff) {  // diff == n: equal
        for (const unsigned char delta : {0x01, 0x80, 0xff}) {
          char* x = a + align;
          char* y = b + (7 - align);
          for (std::size_t i = 0; i < n; ++i)
            x[i] = y[i] = static_cast<char>('a' + i % 26);
          if (diff < n) y[diff] = static_cast<char>(static_cast<unsigned char>(y[diff]) ^ delta);
          // Bytes past n differ: neither compare may read them as part of the n.
          x[n] = '1';
          y[n] = '2';
          BOOST_TEST_REQUIRE(common_prefix(x, y, n) == diff, "n " << n << " diff " << diff);
          BOOST_TEST_REQUIRE(same_bytes(x, y, n) == (diff == n), "n " << n << " diff " << diff);
          ++cases;
        }
      }
    }
  }
  BOOST_TEST(cases == 8u * 861u * 3u);
}

// Several differences: the first one counts, wherever the others lie in the same or a later
// word (the last word overlaps the one before it).
BOOST_AUTO_TEST_CASE(the_first_of_several_differences_counts) {
  const std::string base = "orders.eu.00000001.x";  // 20 bytes: two words and an overlap
  for (std::size_t first = 0; first < base.size(); ++first) {
    for (std::size_t second = first; second < base.size(); ++second) {
      std::string other = base;
      other[first] = '#';
      other[second] = '#';
      BOOST_TEST_REQUIRE(common_prefix(base.data(), other.data(), base.size()) == first);
      BOOST_TEST_REQUIRE(!same_bytes(base.data(), other.data(), base.size()));
    }
  }
}
