// The "did you mean" search for a mistyped name: the nearest known name, bounded in work.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gatewayd::config {

// One per file read: the search is bounded for the whole file, since 10,000 consumers with long
// names and hundreds of mistakes would otherwise cost minutes; past the budget, errors come
// without a suggestion.
class nearest_name {
 public:
  // The name in `known` nearest to `wanted` (at most 2 edits, and clearly similar), or null.
  const std::string* find(const std::set<std::string, std::less<>>& known, std::string_view wanted);

 private:
  // Table cells the search may fill in one file: about 0.1 s.
  static constexpr std::uint64_t budget = 50'000'000;

  std::uint64_t cells_ = 0;
  std::vector<std::size_t> row_;
};

}  // namespace gatewayd::config
