#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <thread>

#include "consumers/file_reaper.hpp"
#include "tests/support/segment_log_files.hpp"

using namespace gatewayd::test::segment_log_files;

BOOST_AUTO_TEST_CASE(round_trip_in_order_across_segments_consume_deletes_whole_files) {
  temp_dir tmp;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096};
  auto log = open_log(tmp.spool(), small);
  for (std::uint64_t at = 0; at < 300; at += 10)
    BOOST_REQUIRE(!append(*log, at, 10, 100));
  BOOST_TEST(log->records() == 300u);
  BOOST_TEST(log->bytes() == 300u * 100);
  BOOST_REQUIRE(!log->sync());
  // 116-byte records, a new file once one passed 4,096 bytes at a call's start: 40 a file.
  const std::size_t files = segment_files(tmp.spool()).size();
  BOOST_TEST(files == 8u);
  BOOST_TEST(log->segment_files() == files);

  std::vector<std::uint64_t> seen;
  while (log->unread_records() > 0) {
    const auto part = read_seqs(*log, 1000);  // 10 frames a read
    BOOST_TEST(part.size() == 10u);
    seen.insert(seen.end(), part.begin(), part.end());
  }
  BOOST_TEST(seen == range(0, 300));
  BOOST_TEST(log->records() == 300u);  // read, not consumed

  BOOST_REQUIRE(!log->consume(39));  // the first file's 40th record is still held
  BOOST_TEST(segment_files(tmp.spool()).size() == files);
  BOOST_REQUIRE(!log->consume(1));
  BOOST_TEST(segment_files(tmp.spool()).size() == files - 1);
  BOOST_REQUIRE(!log->consume(120));
  BOOST_TEST(segment_files(tmp.spool()).size() == files - 4);
  BOOST_TEST(log->records() == 140u);
  BOOST_TEST(log->bytes() == 140u * 100);
  BOOST_REQUIRE(!log->consume(140));
  BOOST_TEST(segment_files(tmp.spool()).size() == 1u);  // the one being written
  BOOST_TEST(log->records() == 0u);
  BOOST_TEST((log->consume(1) == std::errc::invalid_argument));
}

namespace {
std::size_t files_named(const fs::path& dir, const std::string& suffix) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().ends_with(suffix) ? 1 : 0;
  return n;
}
}  // namespace

// The spool thread hands consumed files to a reaper (unlinking 64 MiB took it 15-20 ms). The
// file's name is free at once (renamed), so a prepend that numbers its file as the consumed
// one's is never unlinked by the reaper.
BOOST_AUTO_TEST_CASE(a_reaper_unlinks_consumed_files_and_a_prepend_may_take_their_number) {
  temp_dir tmp;
  gatewayd::consumers::file_reaper reaper;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096, .reaper = &reaper};
  auto log = open_log(tmp.spool(), small);
  for (std::uint64_t at = 0; at < 80; at += 10)
    BOOST_REQUIRE(!append(*log, at, 10, 100));
  BOOST_REQUIRE(!log->sync());
  BOOST_TEST(segment_files(tmp.spool()).size() == 2u);  // 40 records a file
  BOOST_TEST(read_seqs(*log, 4000) == range(0, 40));
  BOOST_REQUIRE(!log->consume(40));
  BOOST_TEST(segment_files(tmp.spool()).size() == 1u);  // renamed before consume() returned
  log->rewind();
  BOOST_REQUIRE(!prepend(*log, 1000, 3, 100));
  BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
  reaper.wait_idle();
  BOOST_TEST(reaper.errors() == 0u);
  BOOST_TEST(files_named(tmp.spool(), ".consumed") == 0u);
  BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
  log.reset();
  BOOST_TEST(read_seqs(*open_log(tmp.spool(), small)) == range(1000, 1003) + range(40, 80));
}

BOOST_AUTO_TEST_CASE(a_consumed_file_its_reaper_never_reached_is_removed_at_open) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 0, 5, 100));
    BOOST_REQUIRE(!log->sync());
  }
  std::ofstream(tmp.spool() / "00000001099511627775.consumed") << "consumed records";
  BOOST_TEST(files_named(tmp.spool(), ".consumed") == 1u);
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), {}, opened);
  BOOST_TEST(files_named(tmp.spool(), ".consumed") == 0u);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(read_seqs(*log) == range(0, 5));
}

BOOST_AUTO_TEST_CASE(reopen_after_sync_resumes_at_the_persisted_head) {
  temp_dir tmp;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096};
  {
    auto log = open_log(tmp.spool(), small);
    for (std::uint64_t at = 0; at < 100; at += 10)
      BOOST_REQUIRE(!append(*log, at, 10, 100));
    BOOST_TEST(read_seqs(*log, 4500) == range(0, 45));
    BOOST_REQUIRE(!log->consume(45));  // past the first file
    BOOST_REQUIRE(!log->sync());
  }
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), small, opened);
  BOOST_TEST(opened.records == 55u);
  BOOST_TEST(opened.bytes == 55u * 100);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(log->records() == 55u);
  BOOST_TEST(read_seqs(*log) == range(45, 100));
  // Appending after a reopen continues behind what it held.
  BOOST_REQUIRE(!append(*log, 100, 5, 100));
  BOOST_TEST(read_seqs(*log) == range(100, 105));
}

// A drain's syncs move only the head: written at each (a reopen, as after a killed process,
// resumes there), its fdatasync at most once per head_sync_interval, or at once when asked.
BOOST_AUTO_TEST_CASE(a_moved_head_is_written_at_each_sync_and_made_durable_when_due) {
  temp_dir tmp;
  segment_log_options slow{};
  slow.head_sync_interval = std::chrono::hours(1);
  {
    auto log = open_log(tmp.spool(), slow);
    BOOST_REQUIRE(!append(*log, 0, 50, 100));
    BOOST_REQUIRE(!log->sync());
    BOOST_TEST(!log->head_pending());  // the first head is due at once
    BOOST_TEST(!log->sync_due());
    BOOST_TEST(read_seqs(*log, 1000) == range(0, 10));
    BOOST_REQUIRE(!log->consume(10));
    BOOST_TEST(log->sync_due());
    BOOST_REQUIRE(!log->sync());
    BOOST_TEST(log->head_pending());  // written, its fdatasync not due for an hour
    BOOST_TEST(!log->sync_due());
    BOOST_TEST(read_seqs(*log, 1000) == range(10, 20));
    BOOST_REQUIRE(!log->consume(10));
    BOOST_REQUIRE(!log->sync(segment_log::head_durability::now));
    BOOST_TEST(!log->head_pending());
    BOOST_TEST(read_seqs(*log, 1000) == range(20, 30));
    BOOST_REQUIRE(!log->consume(10));
    BOOST_REQUIRE(!log->sync());
    BOOST_TEST(log->head_pending());
  }
  BOOST_TEST(read_seqs(*open_log(tmp.spool())) == range(30, 50));
  segment_log_options eager{};
  eager.head_sync_interval = std::chrono::milliseconds(0);
  auto log = open_log(tmp.spool(), eager);
  BOOST_TEST(read_seqs(*log, 1000) == range(30, 40));
  BOOST_REQUIRE(!log->consume(10));
  BOOST_REQUIRE(!log->sync());
  BOOST_TEST(!log->head_pending());
}

BOOST_AUTO_TEST_CASE(reopen_without_syncing_the_head_delivers_from_the_older_head) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 0, 50, 100));
    BOOST_REQUIRE(!log->sync());
    BOOST_TEST(read_seqs(*log, 1000) == range(0, 10));
    BOOST_REQUIRE(!log->consume(10));
    BOOST_REQUIRE(!log->sync());  // the head at 10 is durable
    BOOST_TEST(read_seqs(*log, 2000) == range(10, 30));
    BOOST_REQUIRE(!log->consume(20));  // the head at 30 is not
  }
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), {}, opened);
  BOOST_TEST(opened.records == 40u);  // 10..29 again: at-least-once
  BOOST_TEST(read_seqs(*log) == range(10, 50));
}

BOOST_AUTO_TEST_CASE(a_head_whose_file_was_unlinked_reads_from_the_oldest_file_left) {
  temp_dir tmp;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096};
  {
    auto log = open_log(tmp.spool(), small);
    for (std::uint64_t at = 0; at < 100; at += 10)
      BOOST_REQUIRE(!append(*log, at, 10, 100));
    BOOST_REQUIRE(!log->sync());
    BOOST_TEST(read_seqs(*log, 1000).size() == 10u);
    BOOST_REQUIRE(!log->consume(10));
    BOOST_REQUIRE(!log->sync());  // head: the first file, record 10
    BOOST_TEST(read_seqs(*log, 5000).size() == 50u);
    BOOST_REQUIRE(!log->consume(50));  // the first file is gone, the head not persisted
  }
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), small, opened);
  BOOST_TEST(read_seqs(*log) == range(40, 100));  // the second file's start, 40 <= 60
}

BOOST_AUTO_TEST_CASE(rewind_reads_what_was_not_consumed_again) {
  temp_dir tmp;
  auto log = open_log(tmp.spool());
  BOOST_REQUIRE(!append(*log, 0, 10, 100));
  BOOST_TEST(read_seqs(*log, 600) == range(0, 6));
  BOOST_TEST(log->unread_records() == 4u);
  BOOST_REQUIRE(!log->consume(2));
  log->rewind();
  BOOST_TEST(log->unread_records() == 8u);
  BOOST_TEST(log->records() == 8u);
  BOOST_TEST(read_seqs(*log) == range(2, 10));
  BOOST_TEST((log->consume(9) == std::errc::invalid_argument));
  // A read asks for at least one record even if it is larger than max_bytes.
  log->rewind();
  BOOST_TEST(read_seqs(*log, 1) == range(2, 3));
}

// The consumer's copies still out (a write on its way) stay read: reading goes on after them,
// also when they end a segment file, and they are consumed when delivered.
BOOST_AUTO_TEST_CASE(rewind_keeps_the_oldest_records_still_out_across_files) {
  temp_dir tmp;
  const segment_log_options small{.segment_bytes = 4096, .write_buffer = 4096};
  auto log = open_log(tmp.spool(), small);
  for (std::uint64_t at = 0; at < 100; at += 10)
    BOOST_REQUIRE(!append(*log, at, 10, 100));  // 40 records a file
  BOOST_TEST(read_seqs(*log, 5000) == range(0, 50));
  BOOST_REQUIRE(!log->consume(5));
  log->rewind(35);  // 5..39 out, the first file's last: reading goes on in the second
  BOOST_TEST(log->unread_records() == 60u);
  BOOST_TEST(log->unread_bytes() == 60u * 100);  // what a read is sized by (spool.cpp)
  BOOST_TEST(read_seqs(*log, 1000) == range(40, 50));
  BOOST_TEST(log->unread_bytes() == 50u * 100);
  log->rewind(35);  // as often as it likes: the same place
  BOOST_TEST(read_seqs(*log, 1000) == range(40, 50));
  BOOST_REQUIRE(!log->consume(36));  // the 35 out delivered, and 40
  BOOST_TEST((log->consume(10) == std::errc::invalid_argument));
  // Consuming what was read leaves what is unread as it was.
  BOOST_TEST(log->unread_bytes() == 50u * 100);
  log->rewind(1000);  // more than were read: all of them (41..49) kept
  BOOST_TEST(read_seqs(*log) == range(50, 100));
  BOOST_TEST(log->unread_bytes() == 0u);
  log->rewind();
  BOOST_TEST(log->unread_bytes() == 59u * 100);
  BOOST_TEST(read_seqs(*log) == range(41, 100));
}

// One read walks many records of a window in one go: across the read-ahead window's end (1 MiB)
// and into the next file, every record whole and in order.
BOOST_AUTO_TEST_CASE(a_large_read_crosses_windows_and_files_in_order) {
  temp_dir tmp;
  const segment_log_options mid{.segment_bytes = 3u << 20, .write_buffer = 1u << 20};
  auto log = open_log(tmp.spool(), mid);
  for (std::uint64_t at = 0; at < 20000; at += 1000)
    BOOST_REQUIRE(!append(*log, at, 1000, 300));  // 6 MiB: two files and more
  BOOST_REQUIRE(!log->sync());
  BOOST_TEST(log->segment_files() >= 2u);
  BOOST_TEST(read_seqs(*log, 4u << 20) == range(0, 13981));  // 4 MiB of 300-byte payloads
  BOOST_TEST(read_seqs(*log) == range(13981, 20000));
}

// A record that goes bad on disk after open() (a flipped bit mid-file): the records before it
// are read, the read stops there with EILSEQ, and the cursor stays on it.
BOOST_AUTO_TEST_CASE(a_record_corrupt_after_open_stops_the_read_at_it) {
  temp_dir tmp;
  auto log = open_log(tmp.spool());
  BOOST_REQUIRE(!append(*log, 0, 100, 100));
  BOOST_REQUIRE(!log->sync());
  const auto files = segment_files(tmp.spool());
  BOOST_REQUIRE(files.size() == 1u);
  overwrite_byte(files.front(), 50 * (header + 100) + header + 20, '\x5a');
  std::vector<std::byte> out;
  std::vector<std::uint32_t> sizes;
  BOOST_TEST((log->read(1u << 20, out, sizes) == std::errc::illegal_byte_sequence));
  BOOST_TEST(sizes.size() == 50u);  // 0..49, checked and taken
  BOOST_TEST(log->unread_records() == 50u);
  sizes.clear();
  BOOST_TEST((log->read(1u << 20, out, sizes) == std::errc::illegal_byte_sequence));
  BOOST_TEST(sizes.empty());
}

BOOST_AUTO_TEST_CASE(oldest_ms_is_the_append_time_of_the_record_at_the_head) {
  using std::chrono::milliseconds;
  const auto now_ms = [] {
    return std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  temp_dir tmp;
  std::int64_t second = 0;
  {
    auto log = open_log(tmp.spool());
    BOOST_TEST(!log->oldest_ms().has_value());
    const std::int64_t before = now_ms();
    BOOST_REQUIRE(!append(*log, 0, 2, 100));
    const std::int64_t first = log->oldest_ms().value_or(0);
    BOOST_TEST(first >= before);
    BOOST_TEST(first <= now_ms());
    std::this_thread::sleep_for(milliseconds(30));
    BOOST_REQUIRE(!append(*log, 2, 1, 100));
    BOOST_TEST(log->oldest_ms().value_or(0) == first);  // still the head's
    BOOST_TEST(read_seqs(*log, 100) == range(0, 1));
    BOOST_REQUIRE(!log->consume(1));  // the head's record is unread: its header tells
    BOOST_TEST(log->oldest_ms().value_or(0) == first);
    BOOST_TEST(read_seqs(*log, 100) == range(1, 2));
    BOOST_REQUIRE(!log->consume(1));
    second = log->oldest_ms().value_or(0);
    BOOST_TEST(second >= first + 30);
    BOOST_REQUIRE(!log->sync());
  }
  auto log = open_log(tmp.spool());
  BOOST_TEST(log->oldest_ms().value_or(0) == second);  // from the scan
  BOOST_TEST(read_seqs(*log) == range(2, 3));
  BOOST_REQUIRE(!log->consume(1));
  BOOST_TEST(!log->oldest_ms().has_value());
}

BOOST_AUTO_TEST_CASE(folder_0700_files_0600) {
  temp_dir tmp;
  const mode_t old = ::umask(0);  // so that only the modes asked for show
  const fs::path dir = tmp.path / "a" / "spool";
  {
    auto log = open_log(dir);
    BOOST_REQUIRE(!append(*log, 0, 1, 100));
    BOOST_REQUIRE(!log->sync());
  }
  ::umask(old);
  BOOST_TEST(mode_of(tmp.path / "a") == 0700u);
  BOOST_TEST(mode_of(dir) == 0700u);
  BOOST_TEST(mode_of(dir / "head") == 0600u);
  for (const auto& f : segment_files(dir))
    BOOST_TEST(mode_of(f) == 0600u);
}

BOOST_AUTO_TEST_CASE(a_file_where_the_folder_should_be_is_an_error) {
  temp_dir tmp;
  std::ofstream(tmp.path / "file") << "x";
  segment_log_opened opened;
  std::error_code ec;
  BOOST_TEST(!segment_log::open(tmp.path / "file", {}, opened, ec));
  BOOST_TEST((ec == std::errc::not_a_directory));
  BOOST_TEST(!segment_log::open(tmp.path / "file" / "spool", {}, opened, ec));
  BOOST_TEST((ec == std::errc::not_a_directory));
}

// prepend(): records in front of what the log holds, in a file of their own below the head's.

BOOST_AUTO_TEST_CASE(prepended_records_are_read_first_and_survive_a_reopen) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 100, 10, 100));
    BOOST_TEST(read_seqs(*log, 300) == range(100, 103));
    BOOST_REQUIRE(!log->consume(2));  // the head is inside the file now: 100, 101 are gone
    log->rewind();
    BOOST_REQUIRE(!prepend(*log, 0, 5, 100));
    BOOST_TEST(log->records() == 13u);
    BOOST_TEST(log->bytes() == 13u * 100);
    BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
    BOOST_REQUIRE(!append(*log, 110, 2, 100));  // behind everything, as ever
    BOOST_TEST(read_seqs(*log) == range(0, 5) + range(102, 112));
    BOOST_REQUIRE(!log->sync());
  }
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), {}, opened);
  BOOST_TEST(opened.records == 15u);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(read_seqs(*log) == range(0, 5) + range(102, 112));
}

BOOST_AUTO_TEST_CASE(a_prepend_is_durable_without_a_sync) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 100, 4, 100));
    BOOST_REQUIRE(!prepend(*log, 0, 3, 100));  // and the appends before it with it
  }
  auto log = open_log(tmp.spool());
  BOOST_TEST(read_seqs(*log) == range(0, 3) + range(100, 104));
}

BOOST_AUTO_TEST_CASE(a_prepend_with_records_read_and_not_consumed_is_refused) {
  temp_dir tmp;
  auto log = open_log(tmp.spool());
  BOOST_REQUIRE(!append(*log, 100, 5, 100));
  BOOST_TEST(read_seqs(*log, 200) == range(100, 102));
  BOOST_TEST((prepend(*log, 0, 2, 100) == std::errc::invalid_argument));
  BOOST_TEST(segment_files(tmp.spool()).size() == 1u);
  BOOST_TEST(log->records() == 5u);
  BOOST_TEST(read_seqs(*log) == range(102, 105));  // the cursor did not move
  log->rewind();
  BOOST_REQUIRE(!prepend(*log, 0, 2, 100));
  BOOST_TEST(read_seqs(*log) == range(0, 2) + range(100, 105));
}

BOOST_AUTO_TEST_CASE(a_prepend_on_an_empty_log_numbers_its_file_below_the_first) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!prepend(*log, 0, 3, 100));
    const auto files = segment_files(tmp.spool());
    BOOST_REQUIRE(files.size() == 2u);
    BOOST_TEST(files[0].filename() == "00000001099511627775.seg");  // 2^40 - 1
    BOOST_TEST(files[1].filename() == "00000001099511627776.seg");  // a new log's first
    BOOST_TEST(log->oldest_ms().has_value());
    BOOST_TEST(read_seqs(*log) == range(0, 3));
  }
  auto log = open_log(tmp.spool());
  BOOST_TEST(read_seqs(*log) == range(0, 3));
}

BOOST_AUTO_TEST_CASE(consuming_past_a_prepended_file_deletes_it_and_prepends_stack) {
  temp_dir tmp;
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 100, 5, 100));
    BOOST_REQUIRE(!prepend(*log, 10, 5, 100));
    BOOST_TEST(read_seqs(*log, 200) == range(10, 12));
    BOOST_REQUIRE(!log->consume(2));  // the head is inside the prepended file
    log->rewind();
    BOOST_REQUIRE(!prepend(*log, 0, 3, 100));
    BOOST_TEST(segment_files(tmp.spool()).size() == 3u);
    BOOST_TEST(read_seqs(*log) == range(0, 3) + range(12, 15) + range(100, 105));
    log->rewind();
    BOOST_TEST(read_seqs(*log, 500) == range(0, 3) + range(12, 14));
    BOOST_REQUIRE(!log->consume(3));  // the end of the newest prepended file: it goes
    BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
    BOOST_REQUIRE(!log->consume(2));
    BOOST_TEST(segment_files(tmp.spool()).size() == 2u);
    BOOST_TEST(read_seqs(*log, 200) == range(14, 15) + range(100, 101));
    BOOST_REQUIRE(!log->consume(2));  // across the end of the older one
    BOOST_TEST(segment_files(tmp.spool()).size() == 1u);
    BOOST_REQUIRE(!log->sync());
  }
  auto log = open_log(tmp.spool());
  BOOST_TEST(read_seqs(*log) == range(101, 105));
}

BOOST_AUTO_TEST_CASE(a_file_before_the_head_is_removed_at_open_and_not_counted_as_torn) {
  temp_dir tmp;  // a prepend's file whose head a crash did not let it persist
  {
    auto log = open_log(tmp.spool());
    BOOST_REQUIRE(!append(*log, 100, 3, 100));
    BOOST_REQUIRE(!log->sync());
  }
  std::ofstream(tmp.spool() / "00000001099511627775.seg") << std::string(300, 'x');
  segment_log_opened opened;
  auto log = open_log(tmp.spool(), {}, opened);
  BOOST_TEST(opened.torn_records_cut == 0u);
  BOOST_TEST(opened.torn_bytes_cut == 0u);
  BOOST_TEST(segment_files(tmp.spool()).size() == 1u);
  BOOST_TEST(read_seqs(*log) == range(100, 103));
}

BOOST_AUTO_TEST_CASE(a_prepend_below_segment_zero_overflows) {
  temp_dir tmp;
  fs::create_directories(tmp.spool());
  std::ofstream(tmp.spool() / "00000000000000000000.seg");  // a log begun at 0
  auto log = open_log(tmp.spool());
  BOOST_REQUIRE(!append(*log, 100, 2, 100));
  BOOST_TEST((prepend(*log, 0, 1, 100) == std::errc::value_too_large));
  BOOST_TEST(segment_files(tmp.spool()).size() == 1u);
  BOOST_TEST(read_seqs(*log) == range(100, 102));
}
