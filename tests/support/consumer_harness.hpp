// What the consumer tests share: numbered frames packed into chunks as a supplier's reads leave
// them, a real loopback consumer endpoint that parses every byte, and an io_context run by two
// threads that must end with every chunk freed.
#pragma once

#include <poll.h>

#include <boost/test/unit_test.hpp>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "consumers/consumer.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/wait_until.hpp"
#include "tools/traffic/payload.hpp"

namespace gatewayd::test {

namespace gc = gatewayd::consumers;
namespace gs = gatewayd::protocol;
using asio::ip::tcp;
using namespace std::chrono_literals;

// Non-standard chunks are freed, not cached, on their last release: frame_chunk::live_bytes()
// back at its starting value proves that every reference was released exactly once.
inline constexpr std::size_t test_chunk_capacity = gs::frame_chunk::standard_capacity + 64;

// Runs `f` on `strand` and waits for it (5 s at most): what was posted there before is done.
template <class Strand, class F>
void run_on(Strand& strand, F f) {
  std::promise<void> done;
  asio::post(strand, [&] {
    f();
    done.set_value();
  });
  BOOST_REQUIRE(done.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
}

// The number a frame_source gave the frame (the traffic library's payload header).
inline std::size_t seq_of(std::string_view frame) {
  const auto r = gs::parse_frame(frame, gs::default_max_payload);
  BOOST_REQUIRE(r.state == gs::parse_result::status::frame);
  const auto h = gatewayd::traffic::read_header(r.frame.payload);
  BOOST_REQUIRE(h.has_value());
  return static_cast<std::size_t>(h->sequence);
}

// Frames numbered from 0, packed into chunks back to back the way a supplier's reads leave
// them, each slice carrying `fanout` references (one per consumer it is put to).
class frame_source {
 public:
  // payload_size 0: sizes vary from frame to frame.
  explicit frame_source(std::size_t payload_size, std::string address = "t.seq",
                        std::uint32_t fanout = 1)
      : payload_size_(payload_size), address_(std::move(address)), fanout_(fanout) {}
  frame_source(const frame_source&) = delete;
  frame_source& operator=(const frame_source&) = delete;

  // `count` new frames, grouped by chunk: one group is one put(), like one supplier read.
  std::vector<std::vector<gs::frame_slice>> make(std::size_t count) {
    std::vector<std::vector<gs::frame_slice>> groups;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t seq = encoded_.size();
      const std::size_t size = payload_size_ ? payload_size_ : 8 + (seq * 37) % 700;
      const std::string payload = gatewayd::traffic::numbered_payload(0, seq, size);
      std::string frame = gs::encode_frame(address_, payload);
      if (!chunk_ || used_ + frame.size() > chunk_->capacity()) {
        held_.emplace_back(gs::frame_chunk::acquire(test_chunk_capacity));
        chunk_ = held_.back().get();
        used_ = 0;
        groups.emplace_back();
      } else if (groups.empty()) {
        groups.emplace_back();  // continues the chunk of the previous call
      }
      std::memcpy(chunk_->data() + used_, frame.data(), frame.size());
      chunk_->add_refs(fanout_);
      groups.back().push_back(
          {chunk_, static_cast<std::uint32_t>(used_), static_cast<std::uint32_t>(frame.size())});
      used_ += frame.size();
      encoded_.push_back(std::move(frame));
    }
    return groups;
  }

  std::size_t count() const { return encoded_.size(); }
  const std::string& frame(std::size_t seq) const { return encoded_.at(seq); }

 private:
  std::size_t payload_size_;
  std::string address_;
  std::uint32_t fanout_;
  std::vector<gs::chunk_ptr> held_;  // the source's own reference to each chunk
  gs::frame_chunk* chunk_ = nullptr;
  std::size_t used_ = 0;
  std::vector<std::string> encoded_;
};

struct put_totals {
  std::uint64_t queued = 0;
  bool paused = false;
  bool paused_by_consumer = false;  // a backpressure consumer's own pause (put_result)
};

inline put_totals put_all(gc::consumer& c, const std::vector<std::vector<gs::frame_slice>>& groups,
                          const std::shared_ptr<gc::flow_control_listener>& listener = nullptr) {
  put_totals t;
  for (const auto& g : groups) {
    const auto r = c.put(g, listener);
    t.queued += r.queued;
    t.paused = t.paused || r.pause_supplier;
    t.paused_by_consumer = t.paused_by_consumer || r.paused_by_consumer;
  }
  return t;
}

// The consumer's side of one connection, read with blocking calls and poll() timeouts; every
// byte is parsed as GWP/1, so a partial or corrupt frame in the middle of a stream fails.
class receiver {
 public:
  // `strict`: a corrupt stream fails the test at once (only from the test's main thread);
  // otherwise it ends the connection and corrupt() says so.
  explicit receiver(tcp::socket s, bool strict = true) : sock_(std::move(s)), strict_(strict) {}

  // Reads until `total` whole frames have arrived on this connection.
  bool wait_frames(std::size_t total, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (frames_.size() < total && !eof_) {
      if (!read_some(deadline)) return false;
    }
    return frames_.size() >= total;
  }
  // Reads until the frame numbered `seq` has arrived.
  bool wait_seq(std::size_t seq, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while ((frames_.empty() || seq_of(frames_.back()) < seq) && !eof_) {
      if (!read_some(deadline)) return false;
    }
    return !frames_.empty() && seq_of(frames_.back()) >= seq;
  }
  // Reads until the gateway closes the connection.
  bool wait_eof(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!eof_) {
      if (!read_some(deadline)) return false;
    }
    return true;
  }

  const std::vector<std::string>& frames() const { return frames_; }
  std::vector<std::size_t> seqs() const {
    std::vector<std::size_t> out;
    for (const auto& f : frames_)
      out.push_back(seq_of(f));
    return out;
  }
  // Bytes of a frame cut when the connection ended.
  std::size_t leftover() const { return buf_.size(); }
  bool corrupt() const { return corrupt_; }
  bool eof() const { return eof_; }
  // One read, waiting at most `timeout`.
  void read_for(std::chrono::milliseconds timeout) {
    read_some(std::chrono::steady_clock::now() + timeout);
  }
  // Closing with unread data makes the kernel reset the connection: the peer "dies".
  void close() {
    std::error_code ignored;
    sock_.close(ignored);
  }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{sock_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char tmp[64 * 1024];
    std::error_code ec;
    const std::size_t n = sock_.read_some(asio::buffer(tmp), ec);
    if (ec) {
      eof_ = true;
      return true;
    }
    buf_.append(tmp, n);
    std::size_t at = 0;
    for (;;) {
      const auto r = gs::parse_frame(std::string_view(buf_).substr(at), gs::default_max_payload);
      if (r.state == gs::parse_result::status::error) {
        if (!strict_) {
          corrupt_ = eof_ = true;
          return true;
        }
        BOOST_FAIL("corrupt frame in the stream at offset " << at << ": "
                                                            << gs::to_string(r.error));
      }
      if (r.state == gs::parse_result::status::need_more) break;
      frames_.emplace_back(r.frame.bytes);
      at += r.frame.bytes.size();
    }
    buf_.erase(0, at);
    return true;
  }

  tcp::socket sock_;
  bool strict_;
  std::string buf_;
  std::vector<std::string> frames_;
  bool eof_ = false;
  bool corrupt_ = false;
};

// A consumer endpoint on 127.0.0.1 that accepts with a timeout.
class peer {
 public:
  // `rcvbuf` is set on the listening socket so that accepted sockets start with it.
  explicit peer(std::uint16_t port = 0, int rcvbuf = 0) : acceptor_(io_) {
    const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
    acceptor_.open(at.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    if (rcvbuf) acceptor_.set_option(asio::socket_base::receive_buffer_size(rcvbuf));
    acceptor_.bind(at);
    acceptor_.listen();
  }
  gatewayd::net::endpoint address() const {
    return {"127.0.0.1", acceptor_.local_endpoint().port()};
  }

  std::optional<receiver> accept(std::chrono::milliseconds timeout, bool strict = true) {
    pollfd p{acceptor_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    tcp::socket s(io_);
    acceptor_.accept(s);
    return receiver(std::move(s), strict);
  }

 private:
  asio::io_context io_;  // never run: blocking calls only
  tcp::acceptor acceptor_;
};

// An address where nothing listens (until a peer is made on that port).
inline gatewayd::net::endpoint unused_endpoint() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return {"127.0.0.1", a.local_endpoint().port()};
}

inline gc::consumer_spec spec(gatewayd::net::endpoint at, std::uint32_t capacity,
                              gc::overflow_policy policy, std::uint64_t queue_bytes = 0) {
  gc::consumer_spec s;
  s.name = "test";
  s.address = std::move(at);
  s.queue_capacity = capacity;
  s.queue_bytes = queue_bytes;
  s.overflow = policy;
  return s;
}

struct test_listener : gc::flow_control_listener {
  std::atomic<int> resumed{0};
  std::atomic<int> held{0};  // told its pause is a stalled backpressure consumer's
  void resume_reading() override { ++resumed; }
  void paused_by_stalled_consumer() override { ++held; }
};

inline std::uint64_t dropped(const gc::consumer& c, gc::drop_reason r) {
  return c.stats().dropped[static_cast<std::size_t>(r)].load();
}

// Chunk memory holding frames: alive, and not waiting in a thread's free cache (a lagging
// consumer copies sparse frames into standard chunks of its own, which are cached when freed).
inline std::size_t in_use() {
  return gs::frame_chunk::live_bytes() - gs::frame_chunk::cached_bytes();
}

// An io_context run by two plain threads. At the end it must run out of work by itself (no
// timer or operation left behind by a closed consumer), and every chunk must be freed.
struct io_fixture {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  std::size_t live_before = in_use();

  io_fixture() {
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([this] {
        ioc.run();
        ++finished;
      });
    }
  }
  ~io_fixture() {
    work.reset();
    if (!wait_until([&] { return finished.load() == 2; }, 3s)) {
      BOOST_ERROR("the io_context still had work after every consumer was closed");
      ioc.stop();
    }
    for (auto& t : threads)
      t.join();
    BOOST_TEST(in_use() == live_before);
  }

  std::shared_ptr<gc::consumer> make(const gc::consumer_spec& s,
                                     gatewayd::runtime::byte_budget* budget = nullptr,
                                     gc::link_limits limits = {},
                                     std::chrono::milliseconds slow_after = 100ms) {
    auto c = unstarted(s, budget, limits, slow_after);
    c->start();
    return c;
  }

  // As make(), with a spool in `dir` kept by `spools` (spool_max_bytes `max_bytes`).
  std::shared_ptr<gc::consumer> make_spooled(const gc::consumer_spec& s, gc::spool_thread& spools,
                                             const std::filesystem::path& dir,
                                             std::uint64_t max_bytes) {
    auto c = unstarted(s, nullptr, {}, 100ms);
    std::error_code ec;
    BOOST_REQUIRE_MESSAGE(c->open_spool(spools, dir, max_bytes, ec), ec.message());
    c->start();
    return c;
  }

  std::shared_ptr<gc::consumer> unstarted(const gc::consumer_spec& s,
                                          gatewayd::runtime::byte_budget* budget,
                                          gc::link_limits limits,
                                          std::chrono::milliseconds slow_after) {
    gc::consumer::options o;
    o.slow_after = slow_after;
    o.reconnect_initial = 20ms;
    o.reconnect_max = 200ms;
    o.budget = budget;
    o.limits = limits;
    return std::make_shared<gc::consumer>(gatewayd::runtime::make_executor(ioc), s, o);
  }

  // Runs `f` while both io threads wait on a handler of ours: whatever `f` starts (a drain)
  // runs only after it returns, however the threads are scheduled.
  template <class F>
  auto with_io_held(F f) {
    std::promise<void> go;
    struct release_at_exit {
      std::promise<void>& p;
      ~release_at_exit() { p.set_value(); }
    } release{go};
    auto released = go.get_future().share();
    auto held = std::make_shared<std::atomic<std::size_t>>(0);
    for (std::size_t i = 0; i < threads.size(); ++i) {
      asio::post(ioc, [released, held] {
        ++*held;
        released.wait();
      });
    }
    BOOST_REQUIRE(wait_until([&] { return held->load() == threads.size(); }, 3s));
    return f();
  }
};

// drain_and_close, waiting for `done`; returns the undelivered count.
inline std::uint64_t close_consumer(gc::consumer& c, std::chrono::milliseconds timeout,
                                    gc::drop_reason reason = gc::drop_reason::shutdown) {
  auto p = std::make_shared<std::promise<std::uint64_t>>();
  auto f = p->get_future();
  c.drain_and_close(timeout, reason, [p](std::uint64_t left) { p->set_value(left); });
  BOOST_REQUIRE(f.wait_for(timeout + 3s) == std::future_status::ready);
  return f.get();
}

// Puts 4 frames at a time until the consumer's writes stop completing: the peer does not read,
// its receive buffer and the gateway's send buffer are full. Returns the frames put so far.
inline void fill_until_stuck(gc::consumer& c, frame_source& src) {
  for (int i = 0; i < 2000; ++i) {
    put_all(c, src.make(4));
    if (!wait_until([&] { return c.stats().sent_frames.load() == src.count(); }, 150ms)) return;
  }
  BOOST_FAIL("the socket never filled up");
}

inline constexpr std::size_t big_payload = 16 * 1024 - 32;  // four frames to a chunk

}  // namespace gatewayd::test
