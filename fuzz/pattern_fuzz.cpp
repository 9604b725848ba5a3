// libFuzzer target: pattern validation and matching. Lines of the input are patterns and
// addresses; pattern_error must accept exactly what pattern_matches and the trie can take,
// and the routing table's lookup must give exactly the consumers the reference matcher gives.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/check.hpp"
#include "protocol/frame_codec.hpp"
#include "routing/pattern.hpp"
#include "routing/routing_table.hpp"

using namespace gatewayd::routing;

using gatewayd::fuzz::check;

// Input: lines. Each line is tried as a pattern (valid ones become routes to consumer c<i>,
// i = route number mod 4) and as an address (valid ones are looked up).
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos <= text.size() && lines.size() < 64;) {
    const std::size_t nl = std::min(text.find('\n', pos), text.size());
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }

  routing_rules cfg;
  for (int i = 0; i < 4; ++i) {
    std::string name = "c";
    name += std::to_string(i);
    cfg.consumers.push_back(name);
  }
  std::vector<std::string> patterns;
  std::vector<std::string> addresses;
  for (auto line : lines) {
    const auto why = pattern_error(line);
    if (!why) {
      check(!line.empty() && line.size() <= gatewayd::protocol::max_address_length);
      const auto tokens = split_tokens(line);
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        check(!tokens[i].empty());
        if (tokens[i] == tail_wildcard) check(i + 1 == tokens.size());
      }
      patterns.emplace_back(line);
      cfg.routes.push_back({std::string(line), {cfg.consumers[(patterns.size() - 1) % 4]}});
    } else {
      check(!why->empty());
    }
    if (gatewayd::protocol::valid_address(line)) {
      check(!why);  // every address is also a (literal) pattern
      check(pattern_matches(line, line));
      addresses.emplace_back(line);
    }
  }
  if (lines.size() % 2) cfg.dead_letter = "c3";

  const auto table = routing_table::build(cfg);
  lookup_scratch scratch;
  for (const auto& address : addresses) {
    std::vector<consumer_index> want;
    for (std::size_t r = 0; r < patterns.size(); ++r)
      if (pattern_matches(patterns[r], address)) want.push_back(r % 4);
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    const auto got = table->lookup(address, scratch);
    check(got.matched == !want.empty());
    if (got.matched) {
      check(std::equal(got.consumers.begin(), got.consumers.end(), want.begin(), want.end()));
    } else if (cfg.dead_letter) {
      check(got.consumers.size() == 1 && got.consumers[0] == 3);
    } else {
      check(got.consumers.empty());
    }
  }
  return 0;
}
