// tls13_records' receiving side as a peer can drive it once the handshake is over: records
// sealed with the right key around any content of any type (post-handshake messages split,
// coalesced or malformed, alerts, padding-only records), and raw bytes that are not records at
// all. Whatever comes, nothing crashes or leaks, and application data before the first error
// comes out as it was sealed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/check.hpp"
#include "net/tls13_records.hpp"

using gatewayd::net::byte_buffer;
using gatewayd::net::tls13_records;
using gatewayd::net::traffic_secret;

namespace {

std::unique_ptr<tls13_records> end_of(std::uint16_t suite, unsigned char read_seed,
                                      unsigned char write_seed, bool tickets_allowed) {
  const std::size_t size = suite == 0x1302 ? 48 : 32;
  traffic_secret read, write;
  for (std::size_t i = 0; i < size; ++i) {
    read.bytes[i] = static_cast<unsigned char>(read_seed + 3 * i);
    write.bytes[i] = static_cast<unsigned char>(write_seed + 3 * i);
  }
  read.size = write.size = size;
  return tls13_records::make(suite, read, write, tickets_allowed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  static constexpr std::uint16_t suites[] = {0x1301, 0x1302, 0x1303, 0x1301};
  const std::uint16_t suite = suites[(mode >> 1) & 3];
  const bool client = (mode & 8) != 0;  // a client's records take tickets
  auto peer = end_of(suite, 1, 2, true);
  auto ours = end_of(suite, 2, 1, client);
  gatewayd::fuzz::check(peer && ours);

  // The wire: raw input (mode bit 0), or records the peer sealed: [type][length: 2][content].
  byte_buffer wire;
  std::string sent_data;       // application data, in order, as sealed
  std::size_t first_data = 0;  // the first record's size when it is application data
  const char* in = reinterpret_cast<const char*>(data + 1);
  std::size_t left = size - 1;
  if (mode & 1) {
    wire.append(in, left);
  } else {
    while (left >= 3) {
      // Type 0 is none (RFC 8446 5.4): its record would read as padding then some other type.
      const auto type = in[0] ? static_cast<unsigned char>(in[0]) : std::uint8_t{23};
      std::size_t n = (static_cast<std::size_t>(static_cast<unsigned char>(in[1])) << 8 |
                       static_cast<unsigned char>(in[2])) %
                      (tls13_records::max_plaintext + 1);
      in += 3;
      left -= 3;
      if (n > left) n = left;
      std::error_code ec;
      peer->seal_one(type, {in, n}, wire, ec);
      gatewayd::fuzz::check(!ec);
      if (type == 23) {
        if (wire.size() == tls13_records::header_size + n + 1 + tls13_records::tag_size) {
          first_data = n;
        }
        sent_data.append(in, n);
      }
      in += n;
      left -= n;
    }
  }

  // Open them as tls13_record_reader would: whole records, in order, until the first error.
  std::string opened;
  std::vector<char> into(tls13_records::max_ciphertext);
  std::error_code ec;
  for (std::size_t at = 0; at < wire.size() && !ec;) {
    const std::size_t record = tls13_records::record_size(wire.data() + at, wire.size() - at, ec);
    if (ec || !record || record > wire.size() - at) break;
    const std::size_t n = ours->open(wire.data() + at, record, into.data(), ec);
    gatewayd::fuzz::check(n <= record - tls13_records::header_size - tls13_records::tag_size);
    if (!ec) opened.append(into.data(), n);
    at += record;
  }
  // What came out is what went in, up to where it stopped (raw input opens nothing).
  gatewayd::fuzz::check(sent_data.compare(0, opened.size(), opened) == 0);
  if (mode & 1) gatewayd::fuzz::check(opened.empty());
  // Nothing can stop the first record: the two ends share their keys (this target's own check).
  gatewayd::fuzz::check(opened.size() >= first_data);
  return 0;
}
