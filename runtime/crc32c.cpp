// CRC32C by hand. Debian 12 packages no C library for CRC32C (zlib's crc32 is the other
// polynomial; libcrc32c is not packaged), and the whole of it is a table and one instruction.
#include "runtime/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace gatewayd::runtime {

namespace {

constexpr std::uint32_t poly = 0x82f63b78;  // 0x1EDC6F41 reflected

using table_set = std::array<std::array<std::uint32_t, 256>, 8>;

// t[0] is the byte-at-a-time table; t[k][b] is byte b followed by k zero bytes, so eight
// lookups advance the CRC over eight bytes at once (slicing-by-8).
constexpr table_set make_tables() {
  table_set t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::uint32_t b = 0; b < 256; ++b)
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

constexpr table_set tables = make_tables();

// An unaligned load (free on x86-64). Little-endian hosts only: the slicing below reads the low
// byte first.
template <typename T>
T load(const unsigned char* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t crc, const void* p,
                                                             std::size_t n) noexcept {
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint64_t c = ~crc;
  for (; n >= 8; n -= 8, b += 8)
    c = _mm_crc32_u64(c, load<std::uint64_t>(b));
  // The tail in as few dependent steps as it allows (a record's header is 4 bytes, its frame
  // rarely a multiple of 8): each step waits for the one before.
  auto c32 = static_cast<std::uint32_t>(c);
  if (n >= 4) {
    c32 = _mm_crc32_u32(c32, load<std::uint32_t>(b));
    b += 4;
    n -= 4;
  }
  if (n >= 2) {
    c32 = _mm_crc32_u16(c32, load<std::uint16_t>(b));
    b += 2;
    n -= 2;
  }
  if (n > 0) c32 = _mm_crc32_u8(c32, *b);
  return ~c32;
}
#endif

using crc_fn = std::uint32_t (*)(std::uint32_t, const void*, std::size_t) noexcept;

crc_fn pick() noexcept {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) return &crc32c_sse42;
#endif
  return &crc32c_portable;
}

crc_fn chosen() noexcept {
  static const crc_fn fn = pick();  // once, thread-safe
  return fn;
}

}  // namespace

std::uint32_t crc32c_portable(std::uint32_t crc, const void* p, std::size_t n) noexcept {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "slicing-by-8 as written");
  const auto* b = static_cast<const unsigned char*>(p);
  std::uint32_t c = ~crc;
  for (; n >= 8; n -= 8, b += 8) {
    const std::uint32_t lo = load<std::uint32_t>(b) ^ c;
    const std::uint32_t hi = load<std::uint32_t>(b + 4);
    c = tables[7][lo & 0xff] ^ tables[6][(lo >> 8) & 0xff] ^ tables[5][(lo >> 16) & 0xff] ^
        tables[4][lo >> 24] ^ tables[3][hi & 0xff] ^ tables[2][(hi >> 8) & 0xff] ^
        tables[1][(hi >> 16) & 0xff] ^ tables[0][hi >> 24];
  }
  for (; n > 0; --n, ++b)
    c = (c >> 8) ^ tables[0][(c ^ *b) & 0xff];
  return ~c;
}

std::uint32_t crc32c(std::uint32_t crc, const void* p, std::size_t n) noexcept {
  return chosen()(crc, p, n);
}

bool crc32c_hardware() noexcept {
  return chosen() != &crc32c_portable;
}

}  // namespace gatewayd::runtime
