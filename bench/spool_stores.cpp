// Which store a consumer's spool should keep its frames in (issue 46): the same shape through
// the spool's segment log (consumers/segment_log.hpp), LMDB and SQLite, against the disk's own
// sequential write rate.
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
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "consumers/segment_log.hpp"

namespace {

namespace fs = std::filesystem;
namespace consumers = gatewayd::consumers;
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

// The spool's own log (consumers/segment_log.hpp): records [length][crc32c][time][frame] in
// 64 MiB segment files, one append() and sync() per commit; read back in order (each checksum
// checked), consumed, and the head made durable by a sync() per commit; a file is unlinked once
// the head has passed it.
class segments final : public store {
 public:
  explicit segments(const fs::path& dir) {
    consumers::segment_log_opened opened;
    std::error_code ec;
    log_ = consumers::segment_log::open(dir / "segments", {}, opened, ec);
    if (!log_) fail("open segment log: " + ec.message());
  }
  void append_commit(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    frames_.resize(n * size);
    spans_.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      fill_frame(from + i, frames_.data() + i * size, size);
      spans_.emplace_back(reinterpret_cast<const std::byte*>(frames_.data() + i * size), size);
    }
    check(log_->append(spans_), "append");
    check(log_->sync(), "sync");
  }
  void read_delete(std::uint64_t from, std::uint64_t n, std::size_t size) override {
    out_.clear();
    sizes_.clear();
    while (sizes_.size() < n) {
      const std::size_t before = sizes_.size();
      check(log_->read((n - sizes_.size()) * size, out_, sizes_), "read");
      if (sizes_.size() == before) fail("segment log read short");
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      if (sizes_[i] != size) fail("segment log: a record of the wrong size");
      check_frame(from + i, reinterpret_cast<const char*>(out_.data()) + i * size, size);
    }
    check(log_->consume(n), "consume");
    check(log_->sync(), "sync");
  }

 private:
  static void check(std::error_code ec, const char* what) {
    if (ec) fail(std::string("segment log ") + what + ": " + ec.message());
  }
  std::unique_ptr<consumers::segment_log> log_;
  std::vector<char> frames_;
  std::vector<std::span<const std::byte>> spans_;
  std::vector<std::byte> out_;
  std::vector<std::uint32_t> sizes_;
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
  if (name == "segments") return std::make_unique<segments>(dir);
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
