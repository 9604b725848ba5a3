#include "config/nearest_name.hpp"

#include <algorithm>

namespace gatewayd::config {
namespace {

// The edit distance of `a` and `b` when it is at most `limit`, otherwise limit + 1. Only the
// band |i - j| <= limit of the table can hold such a path, so the cost is (2 limit + 1) cells
// per character instead of the product of the lengths; `cells` counts them.
std::size_t edit_distance_within(std::string_view a, std::string_view b, std::size_t limit,
                                 std::vector<std::size_t>& row, std::uint64_t& cells) {
  if (a.size() > b.size()) std::swap(a, b);
  const std::size_t too_far = limit + 1;
  if (b.size() - a.size() > limit) return too_far;
  row.assign(b.size() + 1, too_far);
  for (std::size_t j = 0; j <= std::min(b.size(), limit); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    const std::size_t lo = i > limit ? i - limit : 1;
    const std::size_t hi = std::min(b.size(), i + limit);
    std::size_t diagonal = row[lo - 1];
    row[lo - 1] = lo == 1 && i <= limit ? i : too_far;
    std::size_t best_in_row = row[lo - 1];
    for (std::size_t j = lo; j <= hi; ++j) {
      const std::size_t above = row[j];
      row[j] =
          std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1), too_far});
      diagonal = above;
      best_in_row = std::min(best_in_row, row[j]);
    }
    cells += hi - lo + 1;
    if (best_in_row > limit) return too_far;  // every path is already too long
  }
  return row[b.size()];
}

}  // namespace

const std::string* nearest_name::find(const std::set<std::string, std::less<>>& known,
                                      std::string_view wanted) {
  const std::string* best = nullptr;
  std::size_t best_distance = 3;
  for (const auto& name : known) {
    if (best_distance == 1 || cells_ > budget) break;
    const std::size_t longer = std::max(name.size(), wanted.size());
    if (longer - std::min(name.size(), wanted.size()) >= best_distance) continue;
    const auto d = edit_distance_within(name, wanted, best_distance - 1, row_, cells_);
    // Short names are all close to each other: only suggest a clearly similar one.
    if (d < best_distance && d * 3 <= longer) {
      best = &name;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace gatewayd::config
