// Reads a toml++ document for a configuration loader, collecting every problem with its position.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "config/config_error.hpp"

namespace gatewayd::config {

// Loaders check a whole file and report everything wrong with it in one go, so the
// accessors below never stop at the first problem: they record it and return "nothing",
// and the loader carries on with the next key. `path` arguments name a table in messages
// ("gateway", "consumers.billing", "routes[2]"); each message starts with the full key path.
class toml_checker {
 public:
  enum class presence : std::uint8_t { optional, required };

  explicit toml_checker(std::string file) : file_(std::move(file)) {}

  const std::string& file() const noexcept { return file_; }
  bool has_errors() const noexcept { return !errors_.empty(); }

  // Parses `text`; a syntax error is recorded (TOML gives no tree to check past it).
  std::optional<toml::table> parse(std::string_view text);

  void error(const toml::source_region& where, std::string message);
  void error(const toml::node& where, std::string message) {
    error(where.source(), std::move(message));
  }
  void error(const toml::key& where, std::string message) {
    error(where.source(), std::move(message));
  }
  // A problem with no better position than the file itself.
  void file_error(std::string message);

  // Reports each key of `table` that is not in `known`, at the key; keys in `reported` (given
  // their own error by the caller) are skipped and not listed.
  void reject_unknown_keys(const toml::table& table, std::string_view path,
                           std::span<const std::string_view> known,
                           std::span<const std::string_view> reported = {});
  void reject_unknown_keys(const toml::table& table, std::string_view path,
                           std::initializer_list<std::string_view> known) {
    reject_unknown_keys(table, path, std::span(known.begin(), known.size()));
  }

  // The child table at `key`; a value of another type is an error.
  const toml::table* table(const toml::table& parent, std::string_view path, std::string_view key,
                           presence p = presence::optional);
  const toml::array* array(const toml::table& parent, std::string_view path, std::string_view key,
                           presence p = presence::optional);
  std::optional<std::string> string(const toml::table& parent, std::string_view path,
                                    std::string_view key, presence p = presence::optional);
  std::optional<bool> boolean(const toml::table& parent, std::string_view path,
                              std::string_view key, presence p = presence::optional);
  // An integer within [min, max]; anything outside is reported with the allowed range.
  std::optional<std::int64_t> integer(const toml::table& parent, std::string_view path,
                                      std::string_view key, std::int64_t min, std::int64_t max,
                                      presence p = presence::optional);

  // The errors so far, in file order.
  std::vector<config_error> take_errors();

 private:
  const toml::node* get(const toml::table& parent, std::string_view path, std::string_view key,
                        presence p);
  void wrong_type(const toml::node& node, std::string_view path, std::string_view key,
                  std::string_view expected);

  std::string file_;
  std::vector<config_error> errors_;
};

// The largest configuration file read: far above any real routing table (10,000 consumers and
// routes take about 1 MiB), far below what would strain the parser's memory.
inline constexpr std::uint64_t max_config_file_bytes = 16 * 1024 * 1024;

// The whole text of a configuration file, or nullopt after recording why it cannot be read.
std::optional<std::string> read_config_text(const std::filesystem::path& file, toml_checker& check);

// "gateway" + "threads" -> "gateway.threads"; an empty path yields the key alone.
std::string join_path(std::string_view path, std::string_view key);
// "an integer", "a string", ...: for messages about a value of the wrong type.
std::string_view describe(toml::node_type type) noexcept;

}  // namespace gatewayd::config
