// Which store a consumer's spool should keep its frames in (issue 46): the same shape through
// an append-only segment log, LMDB and SQLite, against the disk's own sequential write rate.
//
// The shape: N frames of S bytes appended in order, made durable every B frames (the group
// commit a spool thread would do once per spool_sync_ms), then read back in order, each frame
// checked, and deleted from the head in the same commits (what a consumer that returns does).
// Every store syncs each commit to the disk: fdatasync for the raw writes and the segments,
// LMDB's default durable commit, SQLite in WAL mode with synchronous=FULL.
//
// Usage: spool_stores DIR [--frames N] [--size S] [--commit B] [--stores raw,segments,lmdb,sqlite]
// Prints a line per store and phase: frames/s, MB/s, and the bytes on disk at the end of writing.
// DIR must be on the disk to measure (not a tmpfs); each store's files are removed after it.
#include <fcntl.h>
#include <lmdb.h>
#include <nmmintrin.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

struct shape {
  std::uint64_t frames = 2'000'000;
  std::size_t size = 128;
  std::uint64_t commit = 8192;
};

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what);
}

void check_posix(bool ok, const char* what) {
  if (!ok) fail(std::string(what) + ": " + std::strerror(errno));
}

// A frame's bytes: its sequence number, then a pattern derived from it, so a read checks both
// the order and the content.
void fill_frame(std::uint64_t seq, char* out, std::size_t size) {
  std::memcpy(out, &seq, sizeof seq);
  for (std::size_t i = sizeof seq; i < size; ++i)
    out[i] = static_cast<char>((seq * 31 + i) & 0xff);
}

void check_frame(std::uint64_t seq, const char* in, std::size_t size) {
  std::uint64_t got = 0;
  std::memcpy(&got, in, sizeof got);
  if (got != seq) fail("frame " + std::to_string(seq) + " read as " + std::to_string(got));
  for (std::size_t i = sizeof seq; i < size; ++i) {
    if (in[i] != static_cast<char>((seq * 31 + i) & 0xff))
      fail("frame " + std::to_string(seq) + " corrupt");
  }
}

// CRC32C with the SSE4.2 instruction (the segment log's record checksum).
std::uint32_t crc32c(const char* p, std::size_t n) {
  std::uint64_t c = 0xffffffffu;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p)
    c32 = _mm_crc32_u8(c32, static_cast<unsigned char>(*p));
  return c32 ^ 0xffffffffu;
}

std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

class store {
 public:
  virtual ~store() = default;
  // Appends frames [from, from + n) and makes them durable.
  virtual void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) = 0;
  // Reads the next n frames (from `from`) in order, checks them, deletes them durably.
  virtual void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) = 0;
};

// Sequential writes of the same bytes, fdatasync per commit: the disk's floor for this cadence.
class raw_writes final : public store {
 public:
  explicit raw_writes(const fs::path& dir) {
    fd_ = ::open((dir / "raw").c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    check_posix(fd_ >= 0, "open raw");
  }
  ~raw_writes() override { ::close(fd_); }
  void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    buf_.resize(n * size);
    for (std::uint64_t i = 0; i < n; ++i)
      fill_frame(from + i, buf_.data() + i * size, size);
    check_posix(::write(fd_, buf_.data(), buf_.size()) == static_cast<ssize_t>(buf_.size()),
                "write raw");
    check_posix(::fdatasync(fd_) == 0, "fdatasync raw");
  }
  void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    buf_.resize(n * size);
    check_posix(::pread(fd_, buf_.data(), buf_.size(), static_cast<off_t>(from * size)) ==
                    static_cast<ssize_t>(buf_.size()),
                "pread raw");
    for (std::uint64_t i = 0; i < n; ++i)
      check_frame(from + i, buf_.data() + i * size, size);
  }

 private:
  int fd_ = -1;
  std::vector<char> buf_;
};

// Records [length u32][crc32c u32][frame] appended to 64 MiB segments, fdatasync per commit;
// read back in order, each checksum checked, a segment unlinked once read whole.
class segment_log final : public store {
 public:
  static constexpr std::uint64_t segment_bytes = 64u << 20;
  explicit segment_log(const fs::path& dir) : dir_(dir / "segments") {
    fs::create_directories(dir_);
  }
  ~segment_log() override {
    if (wfd_ >= 0) ::close(wfd_);
    if (rfd_ >= 0) ::close(rfd_);
  }
  void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    buf_.clear();
    std::vector<char> frame(size);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (wfd_ < 0 || written_ + buf_.size() >= segment_bytes) roll();
      fill_frame(from + i, frame.data(), size);
      const auto len = static_cast<std::uint32_t>(size);
      const std::uint32_t crc = crc32c(frame.data(), size);
      buf_.insert(buf_.end(), reinterpret_cast<const char*>(&len),
                  reinterpret_cast<const char*>(&len) + 4);
      buf_.insert(buf_.end(), reinterpret_cast<const char*>(&crc),
                  reinterpret_cast<const char*>(&crc) + 4);
      buf_.insert(buf_.end(), frame.begin(), frame.end());
    }
    flush();
    check_posix(::fdatasync(wfd_) == 0, "fdatasync segment");
  }
  void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    const std::size_t record = 8 + size;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (rbuf_at_ + record > rbuf_.size()) refill(record);
      const char* rec = rbuf_.data() + rbuf_at_;
      rbuf_at_ += record;
      std::uint32_t len = 0, crc = 0;
      std::memcpy(&len, rec, 4);
      std::memcpy(&crc, rec + 4, 4);
      if (len != size || crc != crc32c(rec + 8, size)) fail("torn record");
      check_frame(from + i, rec + 8, size);
    }
  }

 private:
  void flush() {
    if (buf_.empty()) return;
    check_posix(::write(wfd_, buf_.data(), buf_.size()) == static_cast<ssize_t>(buf_.size()),
                "write segment");
    written_ += buf_.size();
    buf_.clear();
  }
  void roll() {
    if (wfd_ >= 0) {
      flush();
      check_posix(::fdatasync(wfd_) == 0, "fdatasync segment");
      ::close(wfd_);
    }
    const fs::path p = dir_ / std::to_string(segments_++);
    wfd_ = ::open(p.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    check_posix(wfd_ >= 0, "open segment");
    written_ = 0;
  }
  // The next 1 MiB of records (whole ones: a partial one at the end moves to the front).
  void refill(std::size_t record) {
    if (rfd_ < 0 || read_at_ >= rsize_) next_read_segment();
    rbuf_.erase(rbuf_.begin(), rbuf_.begin() + static_cast<std::ptrdiff_t>(rbuf_at_));
    rbuf_at_ = 0;
    const std::size_t want = std::min<std::uint64_t>(1u << 20, rsize_ - read_at_);
    const std::size_t had = rbuf_.size();
    rbuf_.resize(had + want);
    check_posix(::pread(rfd_, rbuf_.data() + had, want, static_cast<off_t>(read_at_)) ==
                    static_cast<ssize_t>(want),
                "pread segment");
    read_at_ += want;
    if (rbuf_.size() < record) fail("torn record at a segment's end");
  }
  void next_read_segment() {
    if (rfd_ >= 0) {
      ::close(rfd_);
      fs::remove(dir_ / std::to_string(reading_ - 1));  // read whole: gone
    }
    const fs::path p = dir_ / std::to_string(reading_++);
    rfd_ = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    check_posix(rfd_ >= 0, "open segment for reading");
    struct stat st {};
    check_posix(::fstat(rfd_, &st) == 0, "fstat segment");
    rsize_ = static_cast<std::uint64_t>(st.st_size);
    read_at_ = 0;
  }

  fs::path dir_;
  std::vector<char> buf_;
  int wfd_ = -1;
  std::uint64_t written_ = 0;
  std::uint64_t segments_ = 0;
  int rfd_ = -1;
  std::uint64_t reading_ = 0;
  std::uint64_t read_at_ = 0;
  std::uint64_t rsize_ = 0;
  std::vector<char> rbuf_;
  std::size_t rbuf_at_ = 0;
};

void check_mdb(int rc, const char* what) {
  if (rc != MDB_SUCCESS) fail(std::string(what) + ": " + mdb_strerror(rc));
}

// Keys the sequence number (MDB_INTEGERKEY, appended with MDB_APPEND), one durable write
// transaction per commit; reads with a cursor from the first key, deletes in the same commits.
class lmdb_store final : public store {
 public:
  explicit lmdb_store(const fs::path& dir) {
    const fs::path p = dir / "lmdb";
    fs::create_directories(p);
    check_mdb(mdb_env_create(&env_), "mdb_env_create");
    check_mdb(mdb_env_set_mapsize(env_, std::size_t{16} << 30), "mdb_env_set_mapsize");
    check_mdb(mdb_env_open(env_, p.c_str(), 0, 0600), "mdb_env_open");
    MDB_txn* txn = nullptr;
    check_mdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
    check_mdb(mdb_dbi_open(txn, nullptr, MDB_INTEGERKEY, &dbi_), "mdb_dbi_open");
    check_mdb(mdb_txn_commit(txn), "mdb_txn_commit");
  }
  ~lmdb_store() override { mdb_env_close(env_); }
  void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    MDB_txn* txn = nullptr;
    check_mdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
    std::vector<char> frame(size);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint64_t key = from + i;
      fill_frame(key, frame.data(), size);
      MDB_val k{sizeof key, &key};
      MDB_val v{size, frame.data()};
      check_mdb(mdb_put(txn, dbi_, &k, &v, MDB_APPEND), "mdb_put");
    }
    check_mdb(mdb_txn_commit(txn), "mdb_txn_commit");
  }
  void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    MDB_txn* txn = nullptr;
    check_mdb(mdb_txn_begin(env_, nullptr, 0, &txn), "mdb_txn_begin");
    MDB_cursor* cur = nullptr;
    check_mdb(mdb_cursor_open(txn, dbi_, &cur), "mdb_cursor_open");
    MDB_val k, v;
    for (std::uint64_t i = 0; i < n; ++i) {
      check_mdb(mdb_cursor_get(cur, &k, &v, MDB_FIRST), "mdb_cursor_get");
      std::uint64_t key = 0;
      std::memcpy(&key, k.mv_data, sizeof key);
      if (key != from + i || v.mv_size != size) fail("lmdb out of order");
      check_frame(key, static_cast<const char*>(v.mv_data), size);
      check_mdb(mdb_cursor_del(cur, 0), "mdb_cursor_del");
    }
    mdb_cursor_close(cur);
    check_mdb(mdb_txn_commit(txn), "mdb_txn_commit");
  }

 private:
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
};

void check_sql(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    fail(std::string(what) + ": " + sqlite3_errmsg(db));
}

// A table keyed by the sequence number, WAL with synchronous=FULL (every commit durable), one
// transaction per commit; reads in key order, deletes the range read in the same commits.
class sqlite_store final : public store {
 public:
  explicit sqlite_store(const fs::path& dir) {
    check_sql(db_, sqlite3_open((dir / "spool.sqlite").c_str(), &db_), "sqlite3_open");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("CREATE TABLE spool (seq INTEGER PRIMARY KEY, frame BLOB NOT NULL)");
    prepare("INSERT INTO spool (seq, frame) VALUES (?, ?)", &insert_);
    prepare("SELECT seq, frame FROM spool WHERE seq >= ? ORDER BY seq LIMIT ?", &select_);
    prepare("DELETE FROM spool WHERE seq < ?", &delete_);
  }
  ~sqlite_store() override {
    sqlite3_finalize(insert_);
    sqlite3_finalize(select_);
    sqlite3_finalize(delete_);
    sqlite3_close(db_);
  }
  void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    exec("BEGIN");
    std::vector<char> frame(size);
    for (std::uint64_t i = 0; i < n; ++i) {
      fill_frame(from + i, frame.data(), size);
      sqlite3_bind_int64(insert_, 1, static_cast<sqlite3_int64>(from + i));
      sqlite3_bind_blob(insert_, 2, frame.data(), static_cast<int>(size), SQLITE_STATIC);
      check_sql(db_, sqlite3_step(insert_), "insert");
      sqlite3_reset(insert_);
    }
    exec("COMMIT");
  }
  void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    exec("BEGIN");
    sqlite3_bind_int64(select_, 1, static_cast<sqlite3_int64>(from));
    sqlite3_bind_int64(select_, 2, static_cast<sqlite3_int64>(n));
    std::uint64_t seen = 0;
    while (sqlite3_step(select_) == SQLITE_ROW) {
      const auto seq = static_cast<std::uint64_t>(sqlite3_column_int64(select_, 0));
      if (seq != from + seen || static_cast<std::size_t>(sqlite3_column_bytes(select_, 1)) != size)
        fail("sqlite out of order");
      check_frame(seq, static_cast<const char*>(sqlite3_column_blob(select_, 1)), size);
      ++seen;
    }
    sqlite3_reset(select_);
    if (seen != n) fail("sqlite read short");
    sqlite3_bind_int64(delete_, 1, static_cast<sqlite3_int64>(from + n));
    check_sql(db_, sqlite3_step(delete_), "delete");
    sqlite3_reset(delete_);
    exec("COMMIT");
  }

 private:
  void exec(const char* sql) {
    check_sql(db_, sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql);
  }
  void prepare(const char* sql, sqlite3_stmt** out) {
    check_sql(db_, sqlite3_prepare_v2(db_, sql, -1, out, nullptr), sql);
  }
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* select_ = nullptr;
  sqlite3_stmt* delete_ = nullptr;
};

std::unique_ptr<store> make(const std::string& name, const fs::path& dir) {
  if (name == "raw") return std::make_unique<raw_writes>(dir);
  if (name == "segments") return std::make_unique<segment_log>(dir);
  if (name == "lmdb") return std::make_unique<lmdb_store>(dir);
  if (name == "sqlite") return std::make_unique<sqlite_store>(dir);
  fail("unknown store " + name);
}

void run(const std::string& name, const fs::path& base, const shape& s) {
  const fs::path dir = base / ("spool-stores-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const double mb = static_cast<double>(s.frames * s.size) / 1e6;
  std::uint64_t on_disk = 0;
  {
    auto st = make(name, dir);
    const auto phase = [&](const char* what, auto&& step) {
      const auto start = clock_type::now();
      for (std::uint64_t at = 0; at < s.frames; at += s.commit)
        step(at, std::min(s.commit, s.frames - at));
      const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
      std::printf("%-8s %-6s %9.0f frames/s %8.1f MB/s of frames", name.c_str(), what,
                  static_cast<double>(s.frames) / secs, mb / secs);
    };
    phase("write", [&](std::uint64_t at, std::uint64_t n) { st->append_commit(at, n, s.size); });
    on_disk = bytes_under(dir);
    std::printf("  %8.1f MB on disk\n", static_cast<double>(on_disk) / 1e6);
    phase("read", [&](std::uint64_t at, std::uint64_t n) { st->read_delete(at, n, s.size); });
    std::printf("  %8.1f MB left\n", static_cast<double>(bytes_under(dir)) / 1e6);
  }
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: spool_stores DIR [--frames N] [--size S] [--commit B] "
                 "[--stores raw,segments,lmdb,sqlite]\n");
    return 2;
  }
  shape s;
  std::string stores = "raw,segments,lmdb,sqlite";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--frames")
      s.frames = std::strtoull(value, nullptr, 10);
    else if (flag == "--size")
      s.size = std::strtoull(value, nullptr, 10);
    else if (flag == "--commit")
      s.commit = std::strtoull(value, nullptr, 10);
    else if (flag == "--stores")
      stores = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  if (s.size < 8 || s.commit == 0) {
    std::fprintf(stderr, "--size must be at least 8, --commit at least 1\n");
    return 2;
  }
  std::printf("%llu frames of %zu B, a durable commit every %llu frames (%.1f KB)\n",
              static_cast<unsigned long long>(s.frames), s.size,
              static_cast<unsigned long long>(s.commit),
              static_cast<double>(s.commit * s.size) / 1e3);
  try {
    std::stringstream list(stores);
    for (std::string name; std::getline(list, name, ',');)
      run(name, argv[1], s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spool_stores: %s\n", e.what());
    return 1;
  }
  return 0;
}
