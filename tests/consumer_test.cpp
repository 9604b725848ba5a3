#define BOOST_TEST_MODULE consumer
#include <boost/test/unit_test.hpp>

#include <poll.h>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "consumers/consumer.hpp"
#include "protocol/frame_codec.hpp"

namespace gc = gatewayd::consumers;
namespace gs = gatewayd::protocol;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// Non-standard chunks are freed, not cached, on their last release: frame_chunk::live_bytes()
// back at its starting value proves that every reference was released exactly once.
constexpr std::size_t test_chunk_capacity = gs::frame_chunk::standard_capacity + 64;
constexpr std::size_t seq_digits = 8;

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

std::size_t seq_of(std::string_view frame) {
  const auto r = gs::parse_frame(frame, gs::default_max_payload);
  BOOST_REQUIRE(r.state == gs::parse_result::status::frame);
  return std::stoul(std::string(r.frame.payload.substr(0, seq_digits)));
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
      std::string payload = std::to_string(seq);
      payload.insert(0, seq_digits - payload.size(), '0');
      const std::size_t size = payload_size_ ? payload_size_ : 8 + (seq * 37) % 700;
      payload.resize(std::max(size, seq_digits), static_cast<char>('a' + seq % 26));
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
};

put_totals put_all(gc::consumer& c, const std::vector<std::vector<gs::frame_slice>>& groups,
                   const std::shared_ptr<gc::flow_control_listener>& listener = nullptr) {
  put_totals t;
  for (const auto& g : groups) {
    const auto r = c.put(g, listener);
    t.queued += r.queued;
    t.paused = t.paused || r.pause_supplier;
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
gatewayd::net::endpoint unused_endpoint() {
  asio::io_context io;
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return {"127.0.0.1", a.local_endpoint().port()};
}

gc::consumer_spec spec(gatewayd::net::endpoint at, std::uint32_t capacity,
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
  void resume_reading() override { ++resumed; }
};

std::uint64_t dropped(const gc::consumer& c, gc::drop_reason r) {
  return c.stats().dropped[static_cast<std::size_t>(r)].load();
}

// An io_context run by two plain threads. At the end it must run out of work by itself (no
// timer or operation left behind by a closed consumer), and every chunk must be freed.
struct io_fixture {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  std::size_t live_before = gs::frame_chunk::live_bytes();

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
    BOOST_TEST(gs::frame_chunk::live_bytes() == live_before);
  }

  std::shared_ptr<gc::consumer> make(const gc::consumer_spec& s,
                                     gc::queue_budget* budget = nullptr) {
    gc::consumer::options o;
    o.reconnect_initial = 20ms;
    o.reconnect_max = 200ms;
    o.budget = budget;
    auto c = std::make_shared<gc::consumer>(gatewayd::runtime::make_executor(ioc), s, o);
    c->start();
    return c;
  }
};

// drain_and_close, waiting for `done`; returns the undelivered count.
std::uint64_t close_consumer(gc::consumer& c, std::chrono::milliseconds timeout,
                             gc::drop_reason reason = gc::drop_reason::shutdown) {
  auto p = std::make_shared<std::promise<std::uint64_t>>();
  auto f = p->get_future();
  c.drain_and_close(timeout, reason, [p](std::uint64_t left) { p->set_value(left); });
  BOOST_REQUIRE(f.wait_for(timeout + 3s) == std::future_status::ready);
  return f.get();
}

// Puts 4 frames at a time until the consumer's writes stop completing: the peer does not read,
// its receive buffer and the gateway's send buffer are full. Returns the frames put so far.
void fill_until_stuck(gc::consumer& c, frame_source& src) {
  for (int i = 0; i < 2000; ++i) {
    put_all(c, src.make(4));
    if (!wait_until([&] { return c.stats().sent_frames.load() == src.count(); }, 150ms)) return;
  }
  BOOST_FAIL("the socket never filled up");
}

constexpr std::size_t big_payload = 16 * 1024 - 32;  // four frames to a chunk

}  // namespace

BOOST_FIXTURE_TEST_CASE(frames_arrive_byte_for_byte_in_order, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(0);
  std::uint64_t bytes = 0;
  for (int round = 0; round < 10; ++round) {
    const auto t = put_all(*c, src.make(500));
    BOOST_TEST(t.queued == 500u);
    BOOST_TEST(!t.paused);
  }
  for (std::size_t i = 0; i < src.count(); ++i)
    bytes += src.frame(i).size();
  BOOST_REQUIRE(r->wait_frames(src.count(), 5s));
  BOOST_REQUIRE(r->frames().size() == src.count());
  for (std::size_t i = 0; i < src.count(); ++i) {
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i), "frame " << i);
  }
  BOOST_TEST(c->stats().sent_frames.load() == src.count());
  BOOST_TEST(c->stats().sent_bytes.load() == bytes);
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(c->stats().connected.load());
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
  BOOST_TEST(r->wait_eof(2s));
  BOOST_TEST(!c->stats().connected.load());
}

BOOST_FIXTURE_TEST_CASE(concurrent_suppliers_and_fan_out, io_fixture) {
  peer pa;
  peer pb;
  auto a = make(spec(pa.address(), 100000, gc::overflow_policy::drop_oldest));
  auto b = make(spec(pb.address(), 100000, gc::overflow_policy::drop_oldest));
  auto ra = pa.accept(2s);
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(ra);
  BOOST_REQUIRE(rb);
  // Two suppliers on two threads, each frame shared by both consumers (two references).
  frame_source s0(0, "p.zero", 2);
  frame_source s1(0, "p.one", 2);
  const auto run = [&](frame_source& s) {
    for (int round = 0; round < 20; ++round) {
      for (const auto& g : s.make(100)) {
        a->put(g, nullptr);
        b->put(g, nullptr);
      }
    }
  };
  std::thread t0(run, std::ref(s0));
  std::thread t1(run, std::ref(s1));
  t0.join();
  t1.join();
  for (auto* r : {&*ra, &*rb}) {
    BOOST_REQUIRE(r->wait_frames(4000, 5s));
    // Each supplier's frames keep their order; the two interleave arbitrarily.
    std::size_t next0 = 0;
    std::size_t next1 = 0;
    for (const auto& f : r->frames()) {
      const auto v = gs::parse_frame(f, gs::default_max_payload);
      if (v.frame.address == "p.zero") {
        BOOST_TEST_REQUIRE(f == s0.frame(next0++));
      } else {
        BOOST_TEST_REQUIRE(f == s1.frame(next1++));
      }
    }
    BOOST_TEST(next0 == 2000u);
    BOOST_TEST(next1 == 2000u);
  }
  BOOST_TEST(close_consumer(*a, 1s) == 0u);
  BOOST_TEST(close_consumer(*b, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drop_oldest_keeps_the_newest, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto t = put_all(*c, src.make(64));
  BOOST_TEST(t.queued == 64u);  // drop-oldest always takes the new frame
  BOOST_TEST(c->stats().queued_frames.load() == 16u);
  const std::uint64_t drops = dropped(*c, gc::drop_reason::queue_full);
  BOOST_TEST(drops >= 48u);
  BOOST_TEST(c->stats().dropped_total() == drops);

  BOOST_REQUIRE(r->wait_frames(src.count() - drops, 5s));
  const auto seqs = r->seqs();
  BOOST_TEST(seqs.size() == src.count() - drops);
  for (std::size_t i = 1; i < seqs.size(); ++i)
    BOOST_TEST_REQUIRE(seqs[i] > seqs[i - 1]);
  // The queue's 16 frames were the 16 newest.
  for (std::size_t i = 0; i < 16; ++i) {
    BOOST_TEST(seqs[seqs.size() - 16 + i] == src.count() - 16 + i);
  }
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drop_newest_keeps_the_oldest, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::drop_newest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto t = put_all(*c, src.make(64));
  BOOST_TEST(t.queued < 64u);
  BOOST_TEST(c->stats().queued_frames.load() == 16u);
  const std::uint64_t drops = dropped(*c, gc::drop_reason::queue_full);
  BOOST_TEST(drops == 64u - t.queued);

  // What arrives is exactly the first frames, without a gap: the refused ones are the newest.
  BOOST_REQUIRE(r->wait_frames(src.count() - drops, 5s));
  const auto seqs = r->seqs();
  BOOST_TEST(seqs.size() == src.count() - drops);
  for (std::size_t i = 0; i < seqs.size(); ++i)
    BOOST_TEST_REQUIRE(seqs[i] == i);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(disconnect_discards_the_queue_and_redials, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::disconnect));
  auto r1 = p.accept(2s);
  BOOST_REQUIRE(r1);
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  put_all(*c, src.make(64));
  const std::uint64_t slow = dropped(*c, gc::drop_reason::slow_consumer);
  BOOST_TEST(slow > 0u);

  // The first connection ends (after what the kernel had accepted), a second one comes.
  BOOST_REQUIRE(r1->wait_eof(3s));
  auto r2 = p.accept(2s);
  BOOST_REQUIRE(r2);
  BOOST_REQUIRE(wait_until([&] { return c->stats().connected.load(); }, 2s));
  // What was left in the queue after the discard goes to the new connection, whole.
  const std::uint64_t queued_after = src.count() - r1->frames().size() - c->stats().dropped_total();
  BOOST_REQUIRE(r2->wait_frames(queued_after, 3s));
  const auto s1 = r1->seqs();
  const auto s2 = r2->seqs();
  BOOST_TEST(s1.size() + s2.size() + c->stats().dropped_total() == src.count());
  if (!s1.empty() && !s2.empty()) BOOST_TEST(s2.front() > s1.back());
  for (std::size_t i = 1; i < s2.size(); ++i)
    BOOST_TEST(s2[i] > s2[i - 1]);
  if (!s2.empty()) BOOST_TEST(s2.back() == src.count() - 1);
  BOOST_TEST(c->stats().reconnects.load() == 1u);
  BOOST_TEST(c->stats().dropped_total() == dropped(*c, gc::drop_reason::slow_consumer));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(backpressure_drops_nothing_pauses_and_resumes, io_fixture) {
  peer p(0, 4096);
  auto c = make(spec(p.address(), 16, gc::overflow_policy::backpressure));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  auto listener = std::make_shared<test_listener>();
  frame_source src(big_payload);
  fill_until_stuck(*c, src);
  const auto before = c->stats().queued_frames.load();
  const auto t = put_all(*c, src.make(64), listener);
  BOOST_TEST(t.queued == 64u);
  BOOST_TEST(t.paused);
  BOOST_TEST(c->stats().queued_frames.load() == before + 64);  // beyond capacity, bounded
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(listener->resumed.load() == 0);

  // The reader catches up: everything arrives, and the supplier is resumed once.
  BOOST_REQUIRE(r->wait_frames(src.count(), 5s));
  for (std::size_t i = 0; i < src.count(); ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i));
  BOOST_TEST(wait_until([&] { return listener->resumed.load() == 1; }, 2s));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  // Below capacity again: no pause.
  BOOST_TEST(!put_all(*c, src.make(4), listener).paused);
  BOOST_TEST(r->wait_frames(src.count(), 2s));
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
  BOOST_TEST(listener->resumed.load() == 1);
}

BOOST_FIXTURE_TEST_CASE(restart_resends_the_cut_frame_whole, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r1 = p.accept(2s);
  BOOST_REQUIRE(r1);
  frame_source src(3000);
  put_all(*c, src.make(2000));
  BOOST_REQUIRE(r1->wait_frames(300, 3s));
  r1->close();  // the consumer dies with unread data: a reset, mid-batch
  BOOST_REQUIRE(wait_until([&] { return !c->stats().connected.load(); }, 2s));
  put_all(*c, src.make(500));  // put while the consumer is away

  auto r2 = p.accept(2s);
  BOOST_REQUIRE(r2);
  BOOST_REQUIRE(r2->wait_seq(src.count() - 1, 5s));
  const auto s1 = r1->seqs();
  const auto s2 = r2->seqs();
  // The new stream starts on a frame boundary (the receiver parses every byte), after what the
  // old one delivered, and has no gap: frames the kernel took for the dead peer may be lost,
  // nothing after them.
  BOOST_TEST(s2.front() > s1.back());
  for (std::size_t i = 1; i < s2.size(); ++i)
    BOOST_TEST_REQUIRE(s2[i] == s2[i - 1] + 1);
  for (std::size_t i = 0; i < s2.size(); ++i)
    BOOST_TEST_REQUIRE(r2->frames()[i] == src.frame(s2[i]));
  BOOST_TEST(c->stats().dropped_total() == 0u);
  BOOST_TEST(c->stats().reconnects.load() == 1u);
  BOOST_TEST(c->stats().sent_frames.load() >= s1.size() + s2.size());
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(endpoint_down_at_start_then_up, io_fixture) {
  const gatewayd::net::endpoint at = unused_endpoint();
  auto c = make(spec(at, 1000, gc::overflow_policy::drop_oldest));
  frame_source src(0);
  put_all(*c, src.make(100));
  std::this_thread::sleep_for(150ms);  // a few failed dials
  BOOST_TEST(!c->stats().connected.load());
  BOOST_TEST(c->stats().queued_frames.load() == 100u);

  peer p(at.port);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->wait_frames(100, 3s));
  for (std::size_t i = 0; i < 100; ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i));
  BOOST_TEST(c->stats().reconnects.load() == 0u);  // it was never connected before
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(byte_cap_drop_oldest_keeps_the_newest_while_away, io_fixture) {
  const gatewayd::net::endpoint at = unused_endpoint();
  frame_source src(1000);
  const std::uint64_t frame_size = 10 + 5 + 1000;  // header, "t.seq", payload
  auto c = make(spec(at, 1000, gc::overflow_policy::drop_oldest, 10 * frame_size));
  put_all(*c, src.make(30));
  BOOST_TEST(c->stats().queued_frames.load() == 10u);
  BOOST_TEST(c->stats().queued_bytes.load() == 10 * frame_size);
  BOOST_TEST(dropped(*c, gc::drop_reason::queue_bytes) == 20u);

  peer p(at.port);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(r->wait_frames(10, 3s));
  const auto seqs = r->seqs();
  for (std::size_t i = 0; i < 10; ++i)
    BOOST_TEST(seqs[i] == 20 + i);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drain_and_close_delivers_then_refuses, io_fixture) {
  peer p;
  auto c = make(spec(p.address(), 100000, gc::overflow_policy::drop_oldest));
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  frame_source src(100);  // all of it fits in the socket buffers while nobody reads
  put_all(*c, src.make(1000));
  BOOST_TEST(close_consumer(*c, 3s, gc::drop_reason::removed) == 0u);
  BOOST_REQUIRE(r->wait_frames(1000, 3s));
  BOOST_TEST(r->wait_eof(2s));
  BOOST_TEST(c->stats().sent_frames.load() == 1000u);

  // Later puts are refused and counted; their references are released.
  const auto t = put_all(*c, src.make(5));
  BOOST_TEST(t.queued == 0u);
  BOOST_TEST(dropped(*c, gc::drop_reason::removed) == 5u);
  // A second drain_and_close after the close answers at once.
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

BOOST_FIXTURE_TEST_CASE(drain_and_close_gives_up_on_an_unreachable_endpoint, io_fixture) {
  auto c = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_oldest));
  frame_source src(100);
  put_all(*c, src.make(10));
  const auto start = std::chrono::steady_clock::now();
  BOOST_TEST(close_consumer(*c, 200ms) == 10u);
  BOOST_TEST((std::chrono::steady_clock::now() - start >= 200ms));
  BOOST_TEST(dropped(*c, gc::drop_reason::shutdown) == 10u);
  BOOST_TEST(c->stats().queued_frames.load() == 0u);
}

BOOST_FIXTURE_TEST_CASE(global_budget_drops_count_as_global_bytes, io_fixture) {
  frame_source src(1000);
  const std::uint64_t frame_size = 10 + 5 + 1000;  // header, "t.seq", payload
  gc::queue_budget budget(20 * frame_size + 100);
  auto a = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_newest), &budget);
  auto b = make(spec(unused_endpoint(), 1000, gc::overflow_policy::drop_oldest), &budget);

  BOOST_TEST(put_all(*a, src.make(30)).queued == 20u);
  BOOST_TEST(dropped(*a, gc::drop_reason::global_bytes) == 10u);
  BOOST_TEST(budget.used() == 20 * frame_size);

  // The budget is full of a's frames: b has nothing of its own to evict.
  BOOST_TEST(put_all(*b, src.make(5)).queued == 0u);
  BOOST_TEST(dropped(*b, gc::drop_reason::global_bytes) == 5u);

  BOOST_TEST(close_consumer(*a, 50ms) == 20u);
  BOOST_TEST(budget.used() == 0u);

  // Now b fills the budget alone and then evicts its own oldest to make room.
  BOOST_TEST(put_all(*b, src.make(30)).queued == 30u);
  BOOST_TEST(b->stats().queued_frames.load() == 20u);
  BOOST_TEST(dropped(*b, gc::drop_reason::global_bytes) == 15u);
  BOOST_TEST(budget.used() == 20 * frame_size);
  BOOST_TEST(close_consumer(*b, 50ms) == 20u);
  BOOST_TEST(budget.used() == 0u);
}

BOOST_FIXTURE_TEST_CASE(reconfigure_moves_to_a_new_endpoint_keeping_the_queue, io_fixture) {
  peer pa;
  peer pb;
  auto c = make(spec(pa.address(), 1000, gc::overflow_policy::drop_oldest));
  auto ra = pa.accept(2s);
  BOOST_REQUIRE(ra);
  frame_source src(100);
  put_all(*c, src.make(10));
  BOOST_REQUIRE(ra->wait_frames(10, 2s));

  c->reconfigure(spec(pb.address(), 500, gc::overflow_policy::drop_newest));
  BOOST_TEST(c->capacity() == 500u);
  BOOST_TEST((c->policy() == gc::overflow_policy::drop_newest));
  put_all(*c, src.make(10));
  BOOST_REQUIRE(ra->wait_eof(2s));
  auto rb = pb.accept(2s);
  BOOST_REQUIRE(rb);
  BOOST_REQUIRE(rb->wait_frames(10, 2s));
  const auto seqs = rb->seqs();
  for (std::size_t i = 0; i < 10; ++i)
    BOOST_TEST(seqs[i] == 10 + i);
  BOOST_TEST(ra->frames().size() == 10u);
  BOOST_TEST(close_consumer(*c, 1s) == 0u);
}

// Two suppliers race a slow, restarting consumer under the disconnect policy: every frame put
// ends up sent or counted as dropped, every stream parses whole, every reference is released.
BOOST_FIXTURE_TEST_CASE(nothing_is_lost_silently_under_restarts, io_fixture) {
  peer p(0, 8192);
  auto c = make(spec(p.address(), 64, gc::overflow_policy::disconnect));
  std::atomic<bool> stop{false};
  std::atomic<int> connections{0};
  std::atomic<bool> corrupt{false};
  std::thread reader([&] {
    int round = 0;
    while (!stop) {
      auto r = p.accept(20ms, false);
      if (!r) continue;
      ++connections;
      // Alternate short slow readers (resets, slow-consumer closes) with steady ones.
      const auto until = std::chrono::steady_clock::now() + (++round % 2 ? 15ms : 60ms);
      while (!stop && !r->eof() && std::chrono::steady_clock::now() < until) {
        r->read_for(5ms);
        if (round % 2) std::this_thread::sleep_for(2ms);
      }
      if (r->corrupt()) corrupt = true;
    }
  });
  frame_source s0(0, "p.zero");
  frame_source s1(0, "p.one");
  const auto produce = [&](frame_source& s) {
    for (int i = 0; i < 60; ++i) {
      put_all(*c, s.make(50));
      std::this_thread::sleep_for(1ms);
    }
  };
  std::thread t0(produce, std::ref(s0));
  std::thread t1(produce, std::ref(s1));
  t0.join();
  t1.join();
  const std::uint64_t left = close_consumer(*c, 2s);
  stop = true;
  reader.join();
  const auto& st = c->stats();
  BOOST_TEST(st.sent_frames.load() + st.dropped_total() == s0.count() + s1.count());
  BOOST_TEST(dropped(*c, gc::drop_reason::shutdown) == left);
  BOOST_TEST(!corrupt.load());
  BOOST_TEST(connections.load() >= 2);
  BOOST_TEST(st.queued_frames.load() == 0u);
}

BOOST_AUTO_TEST_CASE(drop_reason_names) {
  BOOST_TEST(gc::to_string(gc::drop_reason::queue_full) == "queue_full");
  BOOST_TEST(gc::to_string(gc::drop_reason::queue_bytes) == "queue_bytes");
  BOOST_TEST(gc::to_string(gc::drop_reason::global_bytes) == "global_bytes");
  BOOST_TEST(gc::to_string(gc::drop_reason::slow_consumer) == "slow_consumer");
  BOOST_TEST(gc::to_string(gc::drop_reason::removed) == "removed");
  BOOST_TEST(gc::to_string(gc::drop_reason::shutdown) == "shutdown");
}
