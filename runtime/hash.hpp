// A fast byte hash and compare for tokens and addresses (the routing table's probes, the route
// cache, a consumer group's address balance); keys come from config and trusted-length input.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gatewayd::runtime {

// murmur3's finaliser: spreads every input bit over the whole word.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// The last 1 to 7 bytes as one word, read with whole loads (two overlapping 4-byte reads, or
// the first, middle and last byte): a memcpy of a variable length compiles to byte stores
// that the word load then waits on (a failed store-to-load forward, about a third of a cache
// hit's lookup for a 7-byte address). The length, mixed in first, tells the overlaps apart.
inline std::uint64_t tail_word(const char* p, std::size_t n) noexcept {
  if (n >= 4) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return (std::uint64_t{hi} << 32) | lo;
  }
  const auto byte = [p](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])}; };
  return (byte(0) << 16) | (byte(n / 2) << 8) | byte(n - 1);
}

// Eight bytes per step: tokens and addresses are short, so this beats a byte-wise hash
// (FNV) by a wide margin. No hash table an attacker could fill probes with it (the routing
// table's keys come from config; a group's address balance spreads over a few members), so
// it needs to be fast and well spread rather than flood-resistant.
inline std::uint64_t hash_bytes(std::string_view s) noexcept {
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ULL;
  std::uint64_t h = k ^ s.size();
  const char* p = s.data();
  std::size_t n = s.size();
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * k;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n != 0) h = (h ^ tail_word(p, n)) * k;
  return mix(h);
}

// `n` bytes at a and b are equal: whole-word loads, the last word overlapping the one before.
// Addresses are short, and a call to memcmp costs more than the rest of a route cache hit.
inline bool same_bytes(const char* a, const char* b, std::size_t n) noexcept {
  const auto word = [](const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  };
  // The last word first: addresses that differ tend to differ at their end (t.x.00000001,
  // t.x.00000002), and a repeat costs the same either way.
  if (n >= 8) {
    if (word(a + n - 8) != word(b + n - 8)) return false;
    for (std::size_t i = 0; i + 8 < n; i += 8)
      if (word(a + i) != word(b + i)) return false;
    return true;
  }
  if (n >= 4) {
    std::uint32_t a1, a2, b1, b2;
    std::memcpy(&a1, a, 4);
    std::memcpy(&b1, b, 4);
    std::memcpy(&a2, a + n - 4, 4);
    std::memcpy(&b2, b + n - 4, 4);
    return a2 == b2 && a1 == b1;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// How many of the first `n` bytes at a and b are equal: whole-word loads, the last word
// overlapping the one before (as same_bytes), and the first differing byte of the word that
// differs. Mixed addresses (t.x.00000001, t.x.00000002) differ in their last bytes: a byte loop
// over the tail cost a third of parsing such a frame.
inline std::size_t common_prefix(const char* a, const char* b, std::size_t n) noexcept {
  const auto first_different = [](auto x, auto y) {  // in memory order; x != y
    const auto diff = x ^ y;
    const int bit = std::endian::native == std::endian::little ? std::countr_zero(diff)
                                                               : std::countl_zero(diff);
    return static_cast<std::size_t>(bit / 8);
  };
  // From word `at` on, which with the last word (overlapping it when n is not a multiple)
  // covers the rest of the n bytes: no loop for most addresses (8 to 16 bytes: two words).
  const auto last_two = [&](std::size_t at, auto word) {
    constexpr std::size_t w = sizeof word;
    decltype(word) x, y;
    std::memcpy(&x, a + at, w);
    std::memcpy(&y, b + at, w);
    if (x != y) return at + first_different(x, y);
    std::memcpy(&x, a + n - w, w);
    std::memcpy(&y, b + n - w, w);
    return x == y ? n : n - w + first_different(x, y);
  };
  if (n >= 8) {
    if (n <= 16) return last_two(0, std::uint64_t{});
    std::size_t i = 0;
    for (; i + 16 < n; i += 8) {
      std::uint64_t x, y;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return i + first_different(x, y);
    }
    return last_two(i, std::uint64_t{});
  }
  if (n >= 4) return last_two(0, std::uint32_t{});
  std::size_t i = 0;
  while (i < n && a[i] == b[i])
    ++i;
  return i;
}

}  // namespace gatewayd::runtime
