// The concurrency models to test, read from bench/models.txt: the one list that the tests and
// the benchmarks share.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace gatewayd::test {

struct model {
  std::string name;
  std::vector<std::pair<std::string, std::string>> keys;  // [gateway] key, TOML value

  // The keys as lines for gatewayd.toml's [gateway] table.
  std::string gateway_toml() const;
  // The value of `key` without TOML's quotes, or `fallback` when the model does not set it.
  std::string value_of(const std::string& key, const std::string& fallback) const;
};

// Boost.Test names a data-driven case's sample with this.
std::ostream& operator<<(std::ostream& out, const model& m);

// Every model line of the file (blank lines and # comments skipped); throws when it cannot be
// read or a line is not NAME KEY=VALUE...
std::vector<model> read_models(const std::filesystem::path& file);

}  // namespace gatewayd::test
