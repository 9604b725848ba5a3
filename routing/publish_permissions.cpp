#include "routing/publish_permissions.hpp"

#include <algorithm>

#include "routing/pattern.hpp"

namespace gatewayd::routing {
namespace {

// The next '.'-separated token of `text` from `at`, moving `at` past it (and its dot).
std::string_view next_token(std::string_view text, std::size_t& at) noexcept {
  const std::size_t dot = text.find('.', at);
  const std::size_t end = dot == std::string_view::npos ? text.size() : dot;
  const std::string_view token = text.substr(at, end - at);
  at = dot == std::string_view::npos ? text.size() + 1 : dot + 1;
  return token;
}

bool any_matches(const std::vector<std::string>& patterns, std::string_view address) noexcept {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return pattern_matches_in_place(p, address); });
}

}  // namespace

bool pattern_matches_in_place(std::string_view pattern, std::string_view address) noexcept {
  std::size_t p = 0;
  std::size_t a = 0;
  while (p <= pattern.size()) {
    const std::string_view want = next_token(pattern, p);
    if (a > address.size()) return false;    // the address ran out first
    if (want == tail_wildcard) return true;  // one or more tokens: at least this one is here
    const std::string_view got = next_token(address, a);
    if (want != one_token_wildcard && want != got) return false;
  }
  return a > address.size();  // both ran out together
}

publish_permissions::publish_permissions(std::vector<publish_rule> rules, publish_rule fallback,
                                         std::shared_ptr<publish_drop_counters> dropped)
    : dropped_(dropped ? std::move(dropped) : std::make_shared<publish_drop_counters>()) {
  rules_.reserve(rules.size() + 1);
  rules_.push_back({std::move(fallback)});
  for (auto& r : rules)
    rules_.push_back({std::move(r)});
  for (auto& c : rules_) {
    c.dropped = dropped_->counter(c.spec.name);
    c.allows_all =
        c.spec.deny.empty() && std::find(c.spec.publish.begin(), c.spec.publish.end(),
                                         std::string{tail_wildcard}) != c.spec.publish.end();
  }
}

publish_permissions::rule_index publish_permissions::rule_for(
    std::string_view identity) const noexcept {
  if (identity.empty()) return default_rule;
  for (rule_index i = 1; i < rules_.size(); ++i) {
    if (rules_[i].spec.identity == identity) return i;
  }
  return default_rule;
}

bool publish_permissions::permitted(rule_index rule, std::string_view address) const noexcept {
  const compiled& c = rules_[rule];
  if (c.allows_all) return true;
  return !any_matches(c.spec.deny, address) && any_matches(c.spec.publish, address);
}

}  // namespace gatewayd::routing
