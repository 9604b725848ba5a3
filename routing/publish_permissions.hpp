// Who may publish what (routes.toml's [suppliers.NAME] and [suppliers_default]): immutable,
// built with the routing table and published in the same snapshot. A supplier's rule is found
// by its TLS identity once per read pass; a frame's address is checked against the rule's
// patterns without allocating (the route cache keeps the answer per address beside its route).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "routing/publish_drop_counters.hpp"

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
  // `dropped` holds the not_permitted counters by rule name; every version of the permissions
  // should share the gateway's one (null: counters of their own, for tests).
  publish_permissions(std::vector<publish_rule> rules, publish_rule fallback,
                      std::shared_ptr<publish_drop_counters> dropped = nullptr);

  // The rule of a supplier with this identity (empty: plaintext or no certificate).
  rule_index rule_for(std::string_view identity) const noexcept;
  // May a supplier under `rule` publish to `address`?
  bool permitted(rule_index rule, std::string_view address) const noexcept;
  // The rule lets everything through (publish [">"], no deny): no check per frame.
  bool allows_all(rule_index rule) const noexcept { return rules_[rule].allows_all; }
  const std::string& name(rule_index rule) const noexcept { return rules_[rule].spec.name; }
  // Counts `n` frames `rule` refused: one relaxed add, no lock (once per read, not per frame).
  void count_not_permitted(rule_index rule, std::uint64_t n) const noexcept {
    rules_[rule].dropped->fetch_add(n, std::memory_order_relaxed);
  }
  const publish_drop_counters& dropped() const noexcept { return *dropped_; }

 private:
  struct compiled {
    publish_rule spec;
    bool allows_all = false;
    std::atomic<std::uint64_t>* dropped = nullptr;  // in dropped_, by spec.name
  };
  std::shared_ptr<publish_drop_counters> dropped_;
  std::vector<compiled> rules_;  // [0] = the default
};

}  // namespace gatewayd::routing
