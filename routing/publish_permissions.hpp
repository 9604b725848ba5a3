// Who may publish what (routes.toml's [suppliers.NAME] and [suppliers_default]): immutable,
// built with the routing table and published in the same snapshot. A supplier's rule is found
// by its TLS identity once per read pass; a frame's address is checked against the rule's
// patterns without allocating (the frame router memoises the answer per address).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gatewayd::routing {

struct publish_rule {
  std::string name;                  // [suppliers.NAME]; empty for [suppliers_default]
  std::string identity;              // the client certificate's identity it applies to
  std::vector<std::string> publish;  // patterns it may publish to
  std::vector<std::string> deny;     // patterns it may not, whatever publish says (deny wins)

  friend bool operator==(const publish_rule&, const publish_rule&) = default;
};

// True when the valid routing pattern `pattern` matches the valid address `address`, token by
// token: the same answer as pattern_matches(), without allocating.
bool pattern_matches_in_place(std::string_view pattern, std::string_view address) noexcept;

class publish_permissions {
 public:
  using rule_index = std::uint32_t;
  static constexpr rule_index default_rule = 0;

  // `rules` are the [suppliers.NAME] tables (identities unique), `fallback` the default rule.
  publish_permissions(std::vector<publish_rule> rules, publish_rule fallback);

  // The rule of a supplier with this identity (empty: plaintext or no certificate).
  rule_index rule_for(std::string_view identity) const noexcept;
  // May a supplier under `rule` publish to `address`?
  bool permitted(rule_index rule, std::string_view address) const noexcept;
  // The rule lets everything through (publish [">"], no deny): no check per frame.
  bool allows_all(rule_index rule) const noexcept { return rules_[rule].allows_all; }
  const std::string& name(rule_index rule) const noexcept { return rules_[rule].spec.name; }

 private:
  struct compiled {
    publish_rule spec;
    bool allows_all = false;
  };
  std::vector<compiled> rules_;  // [0] = the default
};

}  // namespace gatewayd::routing
