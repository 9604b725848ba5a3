// strand_drain, the consumer's writer, against a fake batch source and a real loopback
// connection (consumer_link dials a test peer): batches leave in order, a full socket is
// reported as refused, and a write the socket cut goes on from its cut once there is room.
#include <boost/test/unit_test.hpp>

#include <mutex>

#include "consumers/strand_drain.hpp"
#include "tests/support/consumer_harness.hpp"

using namespace gatewayd::test;

namespace {

// The writer's whole view of a consumer: a queue, and counts of how each batch ended.
class fake_source : public gc::batch_source, private gc::link_events {
 public:
  explicit fake_source(asio::io_context& ioc)
      : strand_(gatewayd::runtime::make_strand(gatewayd::runtime::make_executor(ioc))),
        link_(strand_, name_, stats_, gc::backoff(10ms, 100ms), {}, *this),
        drain_(strand_, link_, *this) {}

  void start(const gatewayd::net::endpoint& at, const std::shared_ptr<void>& owner) {
    owner_ = owner;
    asio::post(strand_, [this, at] { link_.start(at, std::nullopt); });
  }
  // Queues the frames and, like consumer::put(), takes the writer role if nobody has it.
  void put(const std::vector<std::vector<gs::frame_slice>>& groups) {
    asio::post(strand_, [this, groups] {
      for (const auto& g : groups)
        for (const auto& f : g)
          queue_.push_back(f);
      if (up_ && !writing_) {
        writing_ = true;
        drain_.start(true);
      }
    });
  }
  void shut() {
    std::promise<void> done;
    asio::post(strand_, [&] {
      link_.shut();
      done.set_value();
    });
    done.get_future().wait();
  }

  std::atomic<std::uint64_t> sent_frames{0};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<bool> up{false};

 private:
  bool take_batch(gc::write_batch& batch, std::uint64_t& conn) override {
    if (!up_ || queue_.empty()) {
      writing_ = false;
      return false;
    }
    batch.fill(queue_);
    conn = conn_;
    ++batches;
    return true;
  }
  void batch_sent(gc::write_batch& batch, std::size_t n) noexcept override {
    sent_frames += batch.written(n).frames;
  }
  void batch_refused() override { ++refused; }
  void batch_failed(gc::write_batch& rest) override {
    ++failed;
    rest.return_to(queue_);
  }
  std::shared_ptr<void> keep_alive() override { return owner_.lock(); }

  void on_link_up(std::uint64_t conn) override {
    conn_ = conn;
    up_ = true;
    up = true;
    writing_ = !queue_.empty();
    drain_.on_link_up(writing_);
  }
  void on_link_down() override {
    up_ = false;
    up = false;
  }

  const std::string name_ = "drain";
  gc::consumer_stats stats_;
  gatewayd::runtime::strand strand_;
  gc::frame_queue queue_{1024};
  gc::consumer_link link_;
  gc::strand_drain drain_;
  std::weak_ptr<void> owner_;
  std::uint64_t conn_ = 0;
  bool up_ = false;
  bool writing_ = false;
};

// One io thread, a source dialled to `p`, and every chunk back at the end.
struct drain_fixture {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(ioc);
  std::shared_ptr<fake_source> source = std::make_shared<fake_source>(ioc);
  std::thread io{[this] { ioc.run(); }};

  ~drain_fixture() {
    // Shut, the link has nothing out that does not end by itself: run() returns.
    source->shut();
    work.reset();
    io.join();
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(batches_are_written_in_order, drain_fixture) {
  peer p;
  source->start(p.address(), source);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(wait_until([&] { return source->up.load(); }, 2s));
  frame_source src(0);
  // More frames than one batch takes: several batches, each after the one before.
  const std::size_t total = 3 * gc::write_batch::max_frames + 17;
  source->put(src.make(total));
  BOOST_REQUIRE(r->wait_frames(total, 5s));
  BOOST_REQUIRE(r->frames().size() == total);
  for (std::size_t i = 0; i < total; ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i), "frame " << i);
  BOOST_TEST(wait_until([&] { return source->sent_frames.load() == total; }, 2s));
  BOOST_TEST(source->batches.load() >= 4u);
  BOOST_TEST(source->failed.load() == 0u);
}

BOOST_FIXTURE_TEST_CASE(a_full_socket_is_refused_and_the_cut_write_resumes, drain_fixture) {
  peer p(0, 4096);  // a small receive buffer: the peer's kernel takes little until it reads
  source->start(p.address(), source);
  auto r = p.accept(2s);
  BOOST_REQUIRE(r);
  BOOST_REQUIRE(wait_until([&] { return source->up.load(); }, 2s));
  frame_source src(big_payload);
  // Far more than both kernels' buffers hold while the peer reads nothing.
  const std::size_t total = 1000;  // ~16 MiB
  source->put(src.make(total));
  BOOST_REQUIRE(wait_until([&] { return source->refused.load() > 0; }, 5s));
  BOOST_TEST(source->sent_frames.load() < total);
  // Reading makes room: the drain goes on from where the socket cut it, every frame whole
  // (the receiver parses each byte) and in order.
  BOOST_REQUIRE(r->wait_frames(total, 20s));
  for (std::size_t i = 0; i < total; ++i)
    BOOST_TEST_REQUIRE(r->frames()[i] == src.frame(i), "frame " << i);
  BOOST_TEST(wait_until([&] { return source->sent_frames.load() == total; }, 2s));
  BOOST_TEST(source->failed.load() == 0u);
}
