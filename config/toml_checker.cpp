#include "config/toml_checker.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gatewayd::config {

std::string join_path(std::string_view path, std::string_view key) {
  std::string out{path};
  if (!out.empty()) out += '.';
  // Quote a key as TOML would need it, so the path can be pasted back into the file.
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  if (bare) {
    out += key;
  } else {
    out += '"';
    out += key;
    out += '"';
  }
  return out;
}

namespace {

std::string_view kind_of(mode_t mode) noexcept {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

std::string too_large(std::uint64_t size) {
  return "file is " + std::to_string(size) + " bytes, more than the " +
         std::to_string(max_config_file_bytes) + " bytes a configuration file may have";
}

}  // namespace

std::optional<std::string> read_config_text(const std::filesystem::path& file,
                                            toml_checker& check) {
  // errno tells the operator *why* (missing, permissions, a directory), not just "cannot read".
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    check.file_error(std::string{"cannot open file: "} + std::strerror(errno));
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    check.file_error(std::string{"cannot read file: "} + std::strerror(EISDIR));
    return std::nullopt;
  }
  // Opening a FIFO for reading blocks until a writer comes (a start-up, a reload or --check
  // would hang), and a device can be endless or act on being opened: neither is opened.
  if (!S_ISREG(st.st_mode)) {
    check.file_error("not a regular file but " + std::string{kind_of(st.st_mode)} +
                     "; refusing to read it");
    return std::nullopt;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_config_file_bytes) {
    check.file_error(too_large(static_cast<std::uint64_t>(st.st_size)));
    return std::nullopt;
  }
  // Non-blocking, and checked again once open: the path may have been replaced meanwhile.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    check.file_error(std::string{"cannot open file: "} + std::strerror(errno));
    return std::nullopt;
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } const close_at_exit{fd};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    check.file_error("not a regular file (replaced while being opened); refusing to read it");
    return std::nullopt;
  }
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      check.file_error(std::string{"cannot read file: "} + std::strerror(errno));
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    // A file that grows while it is read is held to the same cap.
    if (text.size() > max_config_file_bytes) {
      check.file_error(too_large(text.size()));
      return std::nullopt;
    }
  }
  return text;
}

std::string_view describe(toml::node_type type) noexcept {
  switch (type) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
  }
  return "an unknown value";
}

std::optional<toml::table> toml_checker::parse(std::string_view text) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, std::string{file_});
  } catch (const toml::parse_error& e) {
    error(e.source(), std::string{e.description()});
    return std::nullopt;
  }
#else
  auto result = toml::parse(text, std::string{file_});
  if (!result) {
    error(result.error().source(), std::string{result.error().description()});
    return std::nullopt;
  }
  return std::move(result).table();
#endif
}

void toml_checker::error(const toml::source_region& where, std::string message) {
  errors_.push_back(config_error{file_, static_cast<std::uint32_t>(where.begin.line),
                                 static_cast<std::uint32_t>(where.begin.column),
                                 std::move(message)});
}

void toml_checker::file_error(std::string message) {
  errors_.push_back(config_error{file_, 0, 0, std::move(message)});
}

void toml_checker::reject_unknown_keys(const toml::table& table, std::string_view path,
                                       std::span<const std::string_view> known,
                                       std::span<const std::string_view> reported) {
  for (auto&& [key, value] : table) {
    if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
    if (std::find(reported.begin(), reported.end(), key.str()) != reported.end()) continue;
    std::string message = join_path(path, key.str()) + ": unknown key (expected ";
    bool first = true;
    for (auto k : known) {
      if (!first) message += ", ";
      message += k;
      first = false;
    }
    message += ')';
    error(key, std::move(message));
  }
}

const toml::node* toml_checker::get(const toml::table& parent, std::string_view path,
                                    std::string_view key, presence p) {
  const toml::node* node = parent.get(key);
  if (!node && p == presence::required) {
    // The table's own position: that is where the key should have been written.
    error(parent, (path.empty() ? std::string{"file"} : std::string{path}) +
                      ": missing required key \"" + std::string{key} + '"');
  }
  return node;
}

void toml_checker::wrong_type(const toml::node& node, std::string_view path, std::string_view key,
                              std::string_view expected) {
  error(node, join_path(path, key) + ": expected " + std::string{expected} + ", got " +
                  std::string{describe(node.type())});
}

const toml::table* toml_checker::table(const toml::table& parent, std::string_view path,
                                       std::string_view key, presence p) {
  const auto* node = get(parent, path, key, p);
  if (!node) return nullptr;
  if (!node->is_table()) wrong_type(*node, path, key, "a table");
  return node->as_table();
}

const toml::array* toml_checker::array(const toml::table& parent, std::string_view path,
                                       std::string_view key, presence p) {
  const auto* node = get(parent, path, key, p);
  if (!node) return nullptr;
  if (!node->is_array()) wrong_type(*node, path, key, "an array");
  return node->as_array();
}

std::optional<std::string> toml_checker::string(const toml::table& parent, std::string_view path,
                                                std::string_view key, presence p) {
  const auto* node = get(parent, path, key, p);
  if (!node) return std::nullopt;
  if (const auto* s = node->as_string()) return s->get();
  wrong_type(*node, path, key, "a string");
  return std::nullopt;
}

std::optional<bool> toml_checker::boolean(const toml::table& parent, std::string_view path,
                                          std::string_view key, presence p) {
  const auto* node = get(parent, path, key, p);
  if (!node) return std::nullopt;
  if (const auto* b = node->as_boolean()) return b->get();
  wrong_type(*node, path, key, "a boolean (true or false)");
  return std::nullopt;
}

std::optional<std::int64_t> toml_checker::integer(const toml::table& parent, std::string_view path,
                                                  std::string_view key, std::int64_t min,
                                                  std::int64_t max, presence p) {
  const auto* node = get(parent, path, key, p);
  if (!node) return std::nullopt;
  const auto* i = node->as_integer();
  if (!i) {
    wrong_type(*node, path, key, "an integer");
    return std::nullopt;
  }
  const std::int64_t value = i->get();
  if (value < min || value > max) {
    error(*node, join_path(path, key) + ": " + std::to_string(value) + " is out of range (" +
                     std::to_string(min) + ".." + std::to_string(max) + ')');
    return std::nullopt;
  }
  return value;
}

std::vector<config_error> toml_checker::take_errors() {
  sort_by_position(errors_);
  return std::move(errors_);
}

}  // namespace gatewayd::config
