#include "tests/support/test_peers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "protocol/control_message.hpp"
#include "protocol/frame_codec.hpp"
#include "tests/support/wait_until.hpp"

namespace gatewayd::test {

using asio::ip::tcp;

test_consumer::test_consumer(unsigned short port) : test_consumer("127.0.0.1", port) {}

test_consumer::test_consumer(const std::string& host, unsigned short port)
    : acceptor_(ioc_), host_(host) {
  const tcp::endpoint ep(asio::ip::make_address(host), port);
  acceptor_.open(ep.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  thread_ = std::thread([this] { run(); });
}

test_consumer::~test_consumer() {
  stop_ = true;
  thread_.join();
}

void test_consumer::stall(bool on) {
  stalled_ = on;
}
void test_consumer::drop_connection() {
  drop_ = true;
}

// One thread, plain poll(): accepts and reads with short timeouts so stop/stall/drop are seen.
void test_consumer::run() {
  acceptor_.non_blocking(true);
  std::optional<tcp::socket> conn;
  std::string buffer;
  std::vector<char> chunk(256 * 1024);
  std::uint64_t conn_frames = 0;  // this connection's, for its acks
  auto last_ack = std::chrono::steady_clock::now();
  // Acknowledges every frame this connection has read so far (the cumulative ack).
  auto send_ack = [&] {
    char ack[protocol::max_control_size];
    const std::size_t len =
        protocol::encode_control({protocol::control_message::kind::ack, conn_frames}, ack);
    std::error_code ignored;
    asio::write(*conn, asio::buffer(ack, len), ignored);
    last_ack = std::chrono::steady_clock::now();
  };
  auto close_conn = [&] {
    conn_frames = 0;
    if (!buffer.empty()) ++partial_at_close_;
    buffer.clear();
    std::error_code ec;
    conn->close(ec);
    conn.reset();
    ++closes_;
  };
  while (!stop_) {
    if (conn && drop_.exchange(false)) close_conn();
    pollfd fds[2] = {{acceptor_.native_handle(), POLLIN, 0}, {-1, POLLIN, 0}};
    if (conn && !stalled_) fds[1].fd = conn->native_handle();
    ::poll(fds, 2, 20);
    if (conn && ack_ && repeat_acks_ && conn_frames > 0 &&
        std::chrono::steady_clock::now() - last_ack >= std::chrono::milliseconds(100)) {
      send_ack();
    }
    if (fds[0].revents & POLLIN) {
      std::error_code ec;
      tcp::socket s = acceptor_.accept(ec);
      if (!ec) {
        if (conn) close_conn();  // a new connection replaces the old one
        conn.emplace(std::move(s));
        // Not inherited by the processes the test starts later (gateway-peer, a restarted
        // daemon): a connection this side closes must end, not live on in a child.
        ::fcntl(conn->native_handle(), F_SETFD, FD_CLOEXEC);
        conn_frames = 0;
        ++connections_;
      }
    }
    if (!conn || stalled_ || !(fds[1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::error_code ec;
    const std::size_t n = conn->read_some(asio::buffer(chunk), ec);
    if (ec) {
      close_conn();
      continue;
    }
    buffer.append(chunk.data(), n);
    bytes_read_ += n;
    std::size_t pos = 0;
    std::vector<received_frame> got;
    for (;;) {
      const auto r = protocol::parse_frame(std::string_view(buffer).substr(pos), 0xffffffffu);
      if (r.state == protocol::parse_result::status::need_more) break;
      if (r.state == protocol::parse_result::status::error) {
        ++corruptions_;
        buffer.clear();
        pos = 0;
        close_conn();
        break;
      }
      got.push_back({std::string(r.frame.address), std::string(r.frame.payload), connections_});
      pos += r.frame.bytes.size();
    }
    if (conn) buffer.erase(0, pos);
    unparsed_ = buffer.size();
    if (conn && ack_ && !got.empty()) {
      conn_frames += got.size();
      send_ack();
    }
    if (!got.empty()) {
      std::lock_guard lock(mutex_);
      for (auto& f : got)
        frames_.push_back(std::move(f));
      changed_.notify_all();
    }
  }
}

std::vector<received_frame> test_consumer::frames() const {
  std::lock_guard lock(mutex_);
  return frames_;
}

std::size_t test_consumer::count() const {
  std::lock_guard lock(mutex_);
  return frames_.size();
}

bool test_consumer::wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return frames_.size() >= n; });
}

std::size_t test_consumer::count_payload(const std::string& payload) const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(frames_.begin(), frames_.end(),
                    [&](const received_frame& f) { return f.payload == payload; }));
}

bool test_consumer::wait_for_payload(const std::string& payload, std::size_t n,
                                     std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  // Only the frames that arrived since the last look are scanned.
  std::size_t seen = 0, found = 0;
  return changed_.wait_for(lock, timeout, [&] {
    for (; seen < frames_.size(); ++seen)
      found += frames_[seen].payload == payload ? 1 : 0;
    return found >= n;
  });
}

bool test_consumer::wait_for_connections(std::size_t n, std::chrono::milliseconds timeout) const {
  return eventually([&] { return connections_.load() >= n; }, timeout);
}

test_supplier::test_supplier(unsigned short port, const std::string& source) : socket_(ioc_) {
  if (!source.empty()) {
    socket_.open(tcp::v4());
    socket_.bind(tcp::endpoint(asio::ip::make_address(source), 0));
  }
  socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  socket_.set_option(tcp::no_delay(true));
}

void test_supplier::send(const std::string& bytes) {
  asio::write(socket_, asio::buffer(bytes));
}

bool test_supplier::send_within(const std::string& bytes, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t done = 0;
  socket_.non_blocking(true);
  while (done < bytes.size()) {
    std::error_code ec;
    done += socket_.write_some(asio::buffer(bytes.data() + done, bytes.size() - done), ec);
    if (ec && ec != asio::error::would_block) break;
    if (!ec) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{socket_.native_handle(), POLLOUT, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
  }
  socket_.non_blocking(false);
  return done == bytes.size();
}

void test_supplier::send_frame(const std::string& address, const std::string& payload) {
  send(protocol::encode_frame(address, payload));
}

bool test_supplier::closed_by_peer(std::chrono::milliseconds timeout) {
  pollfd fd{socket_.native_handle(), POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char sink[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    if (::poll(&fd, 1, 20) > 0) {
      std::error_code ec;
      socket_.read_some(asio::buffer(sink), ec);
      if (ec) return true;
    }
  }
  return false;
}

unsigned short free_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();  // closed again when `a` goes out of scope
}

refused_port::refused_port() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::error_code ec(errno, std::generic_category());
    release();
    throw std::system_error(ec, "refused_port");
  }
  port_ = ntohs(a.sin_port);
}

void refused_port::release() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  // Every 10 ms: a condition here is often a scrape of the daemon's /metrics.
  return wait_until(condition, timeout, std::chrono::milliseconds(10));
}

}  // namespace gatewayd::test
