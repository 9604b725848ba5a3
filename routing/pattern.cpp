#include "routing/pattern.hpp"

#include <cstdio>

#include "protocol/frame_codec.hpp"

namespace gatewayd::routing {
namespace {

std::string describe_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f) return std::string{'\'', c, '\''};
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", u);
  return buf;
}

}  // namespace

std::optional<std::string> pattern_error(std::string_view pattern) {
  using protocol::max_address_length;
  if (pattern.empty()) return "pattern is empty";
  // Each wildcard matches at least one character, so a pattern longer than the longest
  // address can never match: almost certainly a mistake worth stopping for.
  if (pattern.size() > max_address_length) {
    return "pattern is " + std::to_string(pattern.size()) +
           " characters long; no address (at most " + std::to_string(max_address_length) +
           " characters) can match it";
  }
  std::size_t token_start = 0;
  while (true) {
    const auto dot = pattern.find('.', token_start);
    const auto end = dot == std::string_view::npos ? pattern.size() : dot;
    const auto token = pattern.substr(token_start, end - token_start);
    const auto where = " at character " + std::to_string(token_start + 1);
    if (token.empty())
      return "pattern has an empty token" + where + " (leading, trailing or doubled '.')";
    if (token == tail_wildcard) {
      if (end != pattern.size()) return "'>' is only allowed as the last token" + where;
    } else if (token != one_token_wildcard) {
      for (std::size_t i = 0; i < token.size(); ++i) {
        const char c = token[i];
        const auto position = " at character " + std::to_string(token_start + i + 1);
        if (c == '*' || c == '>') {
          return std::string{"wildcard '"} + c + "' must be a whole token" + position;
        }
        if (!protocol::is_token_char(static_cast<unsigned char>(c))) {
          return "pattern has character " + describe_char(c) + position +
                 "; tokens are made of A-Z a-z 0-9 _ -";
        }
      }
    }
    if (end == pattern.size()) return std::nullopt;
    token_start = end + 1;
  }
}

std::vector<std::string_view> split_tokens(std::string_view text) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  while (true) {
    const auto dot = text.find('.', start);
    if (dot == std::string_view::npos) {
      tokens.push_back(text.substr(start));
      return tokens;
    }
    tokens.push_back(text.substr(start, dot - start));
    start = dot + 1;
  }
}

bool pattern_matches(std::string_view pattern, std::string_view address) {
  const auto p = split_tokens(pattern);
  const auto a = split_tokens(address);
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == tail_wildcard) return a.size() > i;  // one or more tokens left
    if (i >= a.size()) return false;
    if (p[i] != one_token_wildcard && p[i] != a[i]) return false;
  }
  return p.size() == a.size();
}

}  // namespace gatewayd::routing
