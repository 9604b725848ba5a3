// The spool thread against real files: appends read back in order and after a reopen, CONFIRM
// frames settled by the group commit and not before it, refusals at spool_max_bytes and on a
// full disk (root: a 1 MiB tmpfs), prepend, read generations, stop() with work queued, work
// after stop() dropped, and a read whose consumer is gone.
#include <sys/mount.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstring>

#include "tests/support/segment_log_files.hpp"
#include "tests/support/spool_frames.hpp"

using namespace gatewayd::test::spool_frames;
using gatewayd::test::segment_log_files::temp_dir;
using gatewayd::test::segment_log_files::operator+;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(appends_read_back_in_order_and_a_reopen_reads_only_what_was_not_consumed) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  {
    spool_thread t(10ms);
    auto s = open_spool(t, tmp.spool(), settled, r);
    for (int i = 0; i < 3; ++i)
      s->append(f.make(10, false));
    BOOST_TEST(read_all(*s, *r) == seq_range(0, 30));  // 10 a read: 1,000 bytes
    BOOST_TEST(s->stats().read_frames.load() == 30u);
    s->consume(20);
    flushed(*s);
    BOOST_TEST(s->stats().frames.load() == 10u);
    BOOST_TEST(s->stats().bytes.load() == 1000u);
    BOOST_TEST(s->stats().written_frames.load() == 30u);
    BOOST_TEST(s->stats().oldest_ms.load() > 0);
    BOOST_TEST(f.held_refs() == 0u);  // synced: the spool let go of every frame
  }
  spool_thread t(10ms);
  auto s = open_spool(t, tmp.spool(), settled, r);
  BOOST_TEST(s->stats().frames.load() == 10u);
  BOOST_TEST(read_all(*s, *r) == seq_range(20, 30));
  BOOST_TEST(settled.load() == 0u);  // plain frames: nothing to settle
}

BOOST_AUTO_TEST_CASE(confirm_frames_settle_at_the_group_commit_not_before) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(200ms);
  auto s = open_spool(t, tmp.spool(), settled, r);
  const auto start = std::chrono::steady_clock::now();
  s->append(f.make(5, true));
  s->read(1 << 20, 3);  // answered after the append was done
  auto [got, generation] = r->next();
  BOOST_TEST(got.size() == 5u);
  protocol::deliver_slices(got);
  if (std::chrono::steady_clock::now() - start < 150ms) {
    BOOST_TEST(f.advance() == 0u);  // appended, not yet synced
    BOOST_TEST(settled.load() == 0u);
    // The bytes are in the log's buffer: the chunks went back, the entries wait for the sync.
    BOOST_TEST(f.held_refs() == 0u);
    BOOST_TEST(s->stats().syncs.load() == 0u);
  } else {
    BOOST_TEST_MESSAGE("slow machine: the 200 ms sync may have run; 'not before' not checked");
  }
  BOOST_TEST(f.confirmed_at_least(5) == 5u);  // the interval's sync, with no flush asked for
  BOOST_TEST((std::chrono::steady_clock::now() - start >= 190ms));
  BOOST_TEST(f.rejects.empty());
  flushed(*s);  // after the settling job: its count is in
  BOOST_TEST(settled.load() == 5u);
  BOOST_TEST(f.held_refs() == 0u);
  BOOST_TEST(s->stats().syncs.load() >= 1u);
}

BOOST_AUTO_TEST_CASE(with_no_sync_interval_confirm_frames_settle_once_the_queue_is_done) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(0ms);
  auto s = open_spool(t, tmp.spool(), settled, r);
  s->append(f.make(5, true));
  s->append(f.make(5, true));
  BOOST_TEST(f.confirmed_at_least(10) == 10u);  // nobody asked for a flush
  BOOST_TEST(f.rejects.empty());
}

BOOST_AUTO_TEST_CASE(past_max_bytes_frames_are_refused_as_dropped_until_a_consume_makes_room) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(10ms);
  auto s = open_spool(t, tmp.spool(), settled, r, 1000);
  s->append(f.make(8, true));  // 800 bytes
  s->append(f.make(5, true));  // 1,300: refused, all five
  flushed(*s);
  BOOST_TEST(f.confirmed_at_least(13) == 13u);
  std::map<std::uint64_t, reject_reason> want;
  for (std::uint64_t n = 9; n <= 13; ++n)
    want[n] = reject_reason::dropped;
  BOOST_TEST((f.rejects == want));
  BOOST_TEST(s->stats().refused_frames.load() == 5u);
  BOOST_TEST(s->stats().full.load());
  BOOST_TEST(s->stats().no_space.load() == 0u);
  BOOST_TEST(s->stats().io_errors.load() == 0u);
  BOOST_TEST(f.held_refs() == 0u);

  s->read(300, 1);
  auto [got, generation] = r->next();
  BOOST_TEST(got.size() == 3u);
  protocol::deliver_slices(got);
  s->consume(3);  // 500 bytes held: room again
  s->append(f.make(5, true));
  flushed(*s);
  BOOST_TEST(!s->stats().full.load());
  BOOST_TEST(f.confirmed_at_least(18) == 18u);
  BOOST_TEST(f.rejects.size() == 5u);  // no new reject
  BOOST_TEST(s->stats().refused_frames.load() == 5u);
  BOOST_TEST(settled.load() == 18u);
  BOOST_TEST(read_all(*s, *r) == seq_range(3, 8) + seq_range(13, 18));
}

namespace {

// A 1 MiB tmpfs on a folder, unmounted whatever happens.
struct small_tmpfs {
  std::filesystem::path dir;
  bool mounted = false;
  explicit small_tmpfs(std::filesystem::path d) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m,mode=0700") == 0;
  }
  ~small_tmpfs() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_full_disk_refuses_frames_and_loses_none_it_settled) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: mounting a small tmpfs needs root");
    return;
  }
  temp_dir tmp;
  small_tmpfs mnt(tmp.path / "mnt");
  BOOST_REQUIRE_MESSAGE(mnt.mounted, "mount tmpfs: " << std::strerror(errno));
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  std::uint64_t confirmed = 0;
  {
    spool_thread t(0ms);
    auto s = open_spool(t, mnt.dir / "spool", settled, r);
    // 64 KB a batch, each flushed: the write buffer (1 MiB) never hides the disk from a sync.
    for (int i = 0; i < 100 && s->stats().refused_frames.load() == 0; ++i) {
      s->append(f.make(16, true, 4000));
      flushed(*s);
    }
    BOOST_TEST(s->stats().refused_frames.load() > 0u);
    BOOST_TEST(s->stats().no_space.load() > 0u);
    BOOST_TEST(s->stats().full.load());
    confirmed = f.advance();
    BOOST_TEST(confirmed > 0u);
    BOOST_TEST(confirmed < f.next);
    for (const auto& [n, why] : f.rejects)
      BOOST_TEST((why == reject_reason::dropped));
  }  // what never synced is left unsettled, the references all released
  BOOST_TEST(f.held_refs() == 0u);
  spool_thread t(0ms);
  auto s = open_spool(t, mnt.dir / "spool", settled, r);
  const auto back = read_all(*s, *r, 1 << 20);
  // Every frame settled as delivered (numbered seq + 1 in the ledger) is there, in order.
  BOOST_REQUIRE(back.size() >= confirmed - f.rejects.size());
  std::vector<std::uint64_t> want;
  for (std::uint64_t seq = 0; seq < confirmed; ++seq) {
    if (!f.rejects.contains(seq + 1)) want.push_back(seq);
  }
  BOOST_TEST(std::vector<std::uint64_t>(back.begin(), back.begin() + want.size()) == want);
}

BOOST_AUTO_TEST_CASE(a_prepend_after_rewind_is_read_first_and_read_generations_pass_through) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(10s);  // no sync on its own within the test
  auto s = open_spool(t, tmp.spool(), settled, r);
  f.next = 100;
  s->append(f.make(5, false));  // 100..104
  s->read(300, 7);
  auto [got, generation] = r->next();
  BOOST_TEST(generation == 7u);
  BOOST_TEST(got.size() == 3u);
  protocol::deliver_slices(got);
  s->consume(2);
  s->rewind();  // 102 again
  f.next = 0;
  s->prepend(f.make(3, true));                // 0..2, older than what it holds
  BOOST_TEST(f.confirmed_at_least(3) == 3u);  // durable at once: no sync waited for
  BOOST_TEST(s->stats().syncs.load() == 0u);
  BOOST_TEST(read_all(*s, *r) == seq_range(0, 3) + seq_range(102, 105));
  s->read(1000, 8);
  auto [none, later] = r->next();
  BOOST_TEST(none.empty());  // nothing unread
  BOOST_TEST(later == 8u);
  BOOST_TEST(s->stats().frames.load() == 6u);
}

BOOST_AUTO_TEST_CASE(stop_does_the_queued_work_and_drops_what_comes_after_it) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  {
    spool_thread t(10s);
    auto s = open_spool(t, tmp.spool(), settled, r);
    for (int i = 0; i < 10; ++i)
      s->append(f.make(5, true));
    t.stop();
    BOOST_TEST(f.advance() == 50u);  // all synced by stop(), none waited for the interval
    BOOST_TEST(settled.load() == 50u);
    BOOST_TEST(f.held_refs() == 0u);
    t.stop();                    // again: nothing
    s->append(f.make(5, true));  // 50..54: after stop
    s->read(1000, 9);
    BOOST_TEST(f.held_refs() == 0u);    // released at once
    BOOST_TEST(settled.load() == 55u);  // settled by this consumer: left unsettled
    BOOST_TEST(f.advance() == 50u);     // so never confirmed
    BOOST_TEST(f.rejects.empty());      // and not rejected either
    std::lock_guard lock(r->m);
    BOOST_TEST(r->answers.empty());  // a read after stop is never answered
  }
  spool_thread t(10ms);
  auto s = open_spool(t, tmp.spool(), settled, r);
  BOOST_TEST(read_all(*s, *r) == seq_range(0, 50));
}

BOOST_AUTO_TEST_CASE(a_read_for_a_consumer_gone_releases_what_it_read) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(10ms);
  auto s = open_spool(t, tmp.spool(), settled, r);
  s->append(f.make(10, false));
  flushed(*s);
  BOOST_TEST(f.held_refs() == 0u);
  const std::size_t holding =
      protocol::frame_chunk::live_bytes() - protocol::frame_chunk::cached_bytes();
  r.reset();
  s->read(1 << 20, 1);
  flushed(*s);  // after the read
  BOOST_TEST(protocol::frame_chunk::live_bytes() - protocol::frame_chunk::cached_bytes() ==
             holding);
  BOOST_TEST(s->stats().frames.load() == 10u);
}

// A record that goes bad on disk after open (a flipped byte): the read answers the records before
// it; the next, stuck at it, is not answered, so the consumer's read stays out (it reads no more
// and keeps new frames behind the spool, in order) instead of hearing "nothing unread". Each
// read that met it is counted.
BOOST_AUTO_TEST_CASE(a_read_stuck_at_a_record_bad_on_disk_is_not_answered) {
  temp_dir tmp;
  frames f;
  std::atomic<std::uint64_t> settled{0};
  auto r = std::make_shared<reader>();
  spool_thread t(10s);
  auto s = open_spool(t, tmp.spool(), settled, r);
  s->append(f.make(10, false));  // 0..9, 100 bytes each
  flushed(*s);                   // in the file
  namespace files = gatewayd::test::segment_log_files;
  const auto segments = files::segment_files(tmp.spool());
  BOOST_REQUIRE(segments.size() == 1u);
  // Inside record 5's payload.
  files::overwrite_byte(segments.front(), 5 * (files::header + 100) + files::header + 20, '\x5a');
  s->read(1 << 20, 1);
  auto [got, generation] = r->next();
  BOOST_TEST(got.size() == 5u);  // 0..4
  protocol::deliver_slices(got);
  BOOST_TEST(s->stats().io_errors.load() == 1u);
  s->read(1 << 20, 1);
  flushed(*s);  // the read has run
  {
    std::lock_guard lock(r->m);
    BOOST_TEST(r->answers.empty());
  }
  BOOST_TEST(s->stats().io_errors.load() == 2u);
  BOOST_TEST(s->stats().frames.load() == 10u);  // nothing consumed, nothing lost
}
