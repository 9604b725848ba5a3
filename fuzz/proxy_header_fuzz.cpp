// libFuzzer target: the PROXY protocol v2 parser fed arbitrary bytes must agree with itself
// over every prefix (need_more until the size it names, then the same answer as the whole
// input), never claim bytes past its header, and never exceed its size bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "net/proxy_header.hpp"

using namespace gatewayd::net;
using status = proxy_parse_result::status;

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  const proxy_parse_result whole = parse_proxy_v2(input);
  switch (whole.state) {
    case status::need_more:
      check(whole.needed > size);
      check(whole.needed <= proxy_v2_max_size);
      break;
    case status::done:
      check(whole.header.size >= proxy_v2_fixed_size);
      check(whole.header.size <= size);
      check(whole.header.size <= proxy_v2_max_size);
      check(!(whole.header.local && whole.header.source));
      check(whole.header.source.has_value() == whole.header.destination.has_value());
      if (whole.header.source) check(!whole.header.source->to_string().empty());
      break;
    case status::error:
      check(whole.error != proxy_error::none);
      break;
  }
  // What the acceptor does: read what the parser asks for, then ask again. Every prefix must
  // lead to the whole input's answer.
  std::size_t have = 0;
  for (int steps = 0; steps < 4; ++steps) {
    const proxy_parse_result r = parse_proxy_v2(input.first(have));
    if (r.state == status::need_more) {
      check(r.needed > have);
      if (r.needed > size) {
        // The input ends first: the whole of it is a header still incomplete, or one whose
        // error shows in the bytes there are (a wrong signature byte).
        check(whole.state != status::done);
        return 0;
      }
      have = r.needed;
      continue;
    }
    check(r.state == whole.state);
    check(r.error == whole.error);
    if (r.state == status::done) {
      check(r.header.size == have);  // exactly the bytes asked for: nothing of the supplier's
      check(r.header.size == whole.header.size);
      check(r.header.source == whole.header.source);
      check(r.header.local == whole.header.local);
    }
    return 0;
  }
  std::abort();  // the parser asks at most twice: the fixed part, then the whole header
}
