// The routing table's file is named by the SHA-256 of its bytes (config/file_digest), the name
// gatewayd_config_info and /routez give it.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/file_digest.hpp"
#include "config/routes_loader.hpp"

using namespace gatewayd::config;

// gatewayd_config_info and /routez name the table by the SHA-256 of the file's bytes, the same
// hex sha256sum prints, so an operator can compare it with the file on disk.
BOOST_AUTO_TEST_CASE(the_file_is_named_by_its_sha256) {
  BOOST_TEST(sha256_hex("abc") ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const auto path = std::filesystem::temp_directory_path() / "routes_loader_test_sha.toml";
  const std::string text = "[consumers.a]\nendpoint = \"127.0.0.1:7501\"\n";
  std::ofstream(path, std::ios::binary) << text;
  const auto result = load_routes_file(path);
  std::filesystem::remove(path);
  BOOST_TEST(result.errors.empty());
  BOOST_TEST(result.sha256 == sha256_hex(text));
  BOOST_TEST(result.sha256 != sha256_hex(text + "\n"));
}
