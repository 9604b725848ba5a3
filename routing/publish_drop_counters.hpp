// Frames dropped as not_permitted, counted by the publish rule that refused them: one atomic
// counter per rule name ([suppliers.NAME], or "default" for [suppliers_default]), kept for the
// life of the process so the series stays monotonic across reloads.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gatewayd::routing {

// Why by name and for the process's life: a reload builds new permissions, but passes still
// routing by the old ones may count after the swap. Both versions hold the same counter for a
// name, so nothing is lost or counted twice. A removed entry's counter stays (and is exported
// with its last value) until a restart; an entry that comes back counts on. The labels are
// bounded by the names ever configured, never by what a certificate says.
class publish_drop_counters {
 public:
  // The label of [suppliers_default]; routes.toml may not name a [suppliers.default].
  static constexpr std::string_view default_name = "default";

  // The counter for `name` ("" = the default rule), made at zero on first use. Load time only:
  // takes a lock. The address stays valid as long as this object.
  std::atomic<std::uint64_t>* counter(std::string_view name);

  // Every counter by label, for a scrape.
  std::vector<std::pair<std::string, std::uint64_t>> values() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::atomic<std::uint64_t>, std::less<>> by_name_;  // nodes never move
};

}  // namespace gatewayd::routing
