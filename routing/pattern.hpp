// Routing patterns: GWP/1 address tokens plus the `*` and `>` wildcards (validation, reference
// matcher).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gatewayd::routing {

// `*` stands for exactly one token; `>`, only as the last token, for one or more tokens.
inline constexpr std::string_view one_token_wildcard = "*";
inline constexpr std::string_view tail_wildcard = ">";

// Why `pattern` is not a valid routing pattern, or nullopt when it is. The text is written
// for an operator reading a configuration error.
std::optional<std::string> pattern_error(std::string_view pattern);
inline bool valid_pattern(std::string_view pattern) {
  return !pattern_error(pattern);
}

// The '.'-separated tokens of an address or pattern, as views into `text`.
std::vector<std::string_view> split_tokens(std::string_view text);

// The plain, obviously-correct matcher: the oracle that tests hold the routing table's trie
// against. Expects a valid pattern and a valid address; it allocates, so it is not for the
// data path.
bool pattern_matches(std::string_view pattern, std::string_view address);

}  // namespace gatewayd::routing
