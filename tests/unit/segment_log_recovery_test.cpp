// The segment log after a crash or a full disk: a torn or corrupt tail cut and counted, what
// came before it intact, appending behind the cut; ENOSPC leaves it consistent.
#include <sys/mount.h>

#include <boost/test/unit_test.hpp>

#include "tests/support/segment_log_files.hpp"

using namespace gatewayd::test::segment_log_files;

namespace {

// 20 records of 100 bytes in one file, synced; returns the file.
fs::path twenty_records(const fs::path& dir) {
  auto log = open_log(dir);
  BOOST_REQUIRE(!append(*log, 0, 20, 100));
  BOOST_REQUIRE(!log->sync());
  const auto files = segment_files(dir);
  BOOST_REQUIRE(files.size() == 1u);
  BOOST_REQUIRE(fs::file_size(files[0]) == 20 * (header + 100));
  return files[0];
}

// After a tail was damaged: cut_bytes cut as one record, 0..18 intact, appending works.
void check_cut(const fs::path& dir, std::uint64_t cut_bytes) {
  {
    segment_log_opened opened;
    auto log = open_log(dir, {}, opened);
    BOOST_TEST(opened.torn_records_cut == 1u);
    BOOST_TEST(opened.torn_bytes_cut == cut_bytes);
    BOOST_TEST(opened.records == 19u);
    BOOST_TEST(fs::file_size(segment_files(dir)[0]) == 19 * (header + 100));
    BOOST_TEST(read_seqs(*log) == range(0, 19));
    BOOST_REQUIRE(!append(*log, 100, 5, 100));
    BOOST_TEST(read_seqs(*log) == range(100, 105));
    BOOST_REQUIRE(!log->sync());
  }
  segment_log_opened opened;
  auto log = open_log(dir, {}, opened);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(opened.records == 24u);
  auto expected = range(0, 19);
  for (std::uint64_t i = 100; i < 105; ++i)
    expected.push_back(i);
  BOOST_TEST(read_seqs(*log) == expected);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_tail_torn_in_the_header_is_cut) {
  temp_dir tmp;
  const fs::path file = twenty_records(tmp.spool());
  fs::resize_file(file, 19 * (header + 100) + 7);
  check_cut(tmp.spool(), 7);
}

BOOST_AUTO_TEST_CASE(a_tail_torn_in_the_body_is_cut) {
  temp_dir tmp;
  const fs::path file = twenty_records(tmp.spool());
  fs::resize_file(file, 19 * (header + 100) + header + 50);
  check_cut(tmp.spool(), header + 50);
}

BOOST_AUTO_TEST_CASE(a_flipped_byte_in_the_last_record_is_cut) {
  temp_dir tmp;
  const fs::path file = twenty_records(tmp.spool());
  // The payload byte was (19 * 31 + 30) & 0xff = 0x6b.
  overwrite_byte(file, 19 * (header + 100) + header + 30, '\xee');
  check_cut(tmp.spool(), header + 100);
}

BOOST_AUTO_TEST_CASE(a_corrupt_record_cuts_the_later_files_too) {
  temp_dir tmp;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096};
  {
    auto log = open_log(tmp.spool(), small);
    for (std::uint64_t at = 0; at < 100; at += 10)
      BOOST_REQUIRE(!append(*log, at, 10, 100));
    BOOST_REQUIRE(!log->sync());
  }
  const auto files = segment_files(tmp.spool());
  BOOST_REQUIRE(files.size() == 3u);                         // 40, 40, 20 records
  overwrite_byte(files[1], 5 * (header + 100) + 2, '\x7f');  // record 45's length
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), small, opened);
  BOOST_TEST(opened.torn_records_cut == 1u);
  BOOST_TEST(opened.torn_bytes_cut == 55 * (header + 100));
  BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
  BOOST_TEST(read_seqs(*log) == range(0, 45));
}
namespace {

// A 1 MiB tmpfs on a folder, unmounted whatever happens.
struct small_tmpfs {
  fs::path dir;
  bool mounted = false;
  explicit small_tmpfs(fs::path d) : dir(std::move(d)) {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m,mode=0700") == 0;
  }
  ~small_tmpfs() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(enospc_leaves_the_log_consistent) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: mounting a small tmpfs needs root");
    return;
  }
  temp_dir tmp;
  small_tmpfs fs1(tmp.path / "mnt");
  BOOST_REQUIRE_MESSAGE(fs1.mounted, "mount tmpfs: " << std::strerror(errno));
  const fs::path dir = fs1.dir / "spool";
  const segment_log_options small{.segment_bytes = 256 << 10, .write_buffer = 16 << 10};
  constexpr std::size_t size = 1000, record = header + size;
  auto log = open_log(dir, small);
  std::uint64_t appended = 0;
  std::error_code ec;
  while (!(ec = append(*log, appended, 4, size)))
    appended += 4;
  BOOST_CHECK_MESSAGE(ec == std::errc::no_space_on_device, ec.message());
  BOOST_TEST(appended > 500u);  // most of the MiB
  BOOST_TEST(log->records() == appended);
  for (const auto& f : segment_files(dir))  // no partly written record left behind
    BOOST_TEST(fs::file_size(f) % record == 0u);
  BOOST_TEST(read_seqs(*log) == range(0, appended));  // from the files and the buffer
  log->rewind();
  // Consuming the first file gives the room back: the buffer is written, more appended.
  const std::uint64_t first_file = (small.segment_bytes + record - 1) / record / 4 * 4 + 4;
  BOOST_TEST(read_seqs(*log, first_file * size).size() == first_file);
  BOOST_REQUIRE(!log->consume(first_file));
  BOOST_REQUIRE_MESSAGE(!(ec = log->sync()), ec.message());
  BOOST_REQUIRE(!append(*log, appended, 40, size));
  BOOST_REQUIRE(!log->sync());
  log.reset();
  segment_log_opened opened;
  log = open_log(dir, small, opened);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(opened.records == appended + 40 - first_file);
  BOOST_TEST(read_seqs(*log) == range(first_file, appended + 40));
}
