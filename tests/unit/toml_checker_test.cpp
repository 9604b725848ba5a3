// Reading a configuration file (read_config_text): what an operator can put at the path, and
// the error that names it. Only regular files of at most max_config_file_bytes are read; a
// FIFO or a device is refused without being opened for reading.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "config/toml_checker.hpp"

using namespace gatewayd::config;
namespace fs = std::filesystem;

namespace {

// The one error reading `file` gave ("" when it was read), as the operator sees it.
std::string read_error(const fs::path& file) {
  toml_checker check{file.string()};
  const auto text = read_config_text(file, check);
  const auto errors = check.take_errors();
  BOOST_TEST(text.has_value() == errors.empty());
  BOOST_TEST(errors.size() <= 1u);
  return errors.empty() ? std::string() : errors[0].to_string();
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("toml_checker_test_" + name + std::to_string(::getpid()));
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_missing_file_or_a_directory_says_why) {
  BOOST_TEST(read_error("/nonexistent/dir/routes.toml") ==
             "/nonexistent/dir/routes.toml: cannot open file: No such file or directory");
  const auto dir = fs::temp_directory_path();
  BOOST_TEST(read_error(dir) == dir.string() + ": cannot read file: Is a directory");
}

BOOST_AUTO_TEST_CASE(a_file_at_the_cap_is_read_one_byte_more_is_refused) {
  const auto file = scratch("big");
  std::ofstream(file, std::ios::binary) << std::string(max_config_file_bytes, '#');
  BOOST_TEST(read_error(file).empty());
  std::ofstream(file, std::ios::binary | std::ios::app) << '\n';
  const auto error = read_error(file);
  fs::remove(file);
  BOOST_TEST(error == file.string() + ": file is " + std::to_string(max_config_file_bytes + 1) +
                          " bytes, more than the " + std::to_string(max_config_file_bytes) +
                          " bytes a configuration file may have");
}

// A FIFO would block the reader until some writer came (start-up, a reload, --check).
BOOST_AUTO_TEST_CASE(a_fifo_is_refused_without_blocking) {
  const auto fifo = scratch("fifo");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto reading = std::async(std::launch::async, [&] { return read_error(fifo); });
  const bool returned = reading.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  // Release a blocked reader so the test can end: a writer that closes at once.
  if (!returned) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
  const auto error = reading.get();
  fs::remove(fifo);
  BOOST_TEST_REQUIRE(returned, "reading a FIFO blocked");
  BOOST_TEST(error == fifo.string() + ": not a regular file but a FIFO; refusing to read it");
}

BOOST_AUTO_TEST_CASE(a_device_is_refused) {
  BOOST_TEST(read_error("/dev/null") ==
             "/dev/null: not a regular file but a character device; refusing to read it");
}
