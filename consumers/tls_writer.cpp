#include "consumers/tls_writer.hpp"

#include <algorithm>
#include <cstring>

#include "consumers/consumer.hpp"
#include "consumers/strand_drain.hpp"

namespace gatewayd::consumers {

void tls_writer::write() {
  auto stream = c_.link_.secure_stream();
  if (!buffer_) buffer_ = std::make_unique<char[]>(max_bytes);
  std::size_t length = 0;
  for (const iovec& v : drain_.batch_.unwritten()) {
    const std::size_t take = std::min(v.iov_len, max_bytes - length);
    std::memcpy(buffer_.get() + length, v.iov_base, take);
    length += take;
    if (length == max_bytes) break;
  }
  // The channel encrypts the whole buffer at once, into records of its own: the handler holds
  // the consumer (and the channel holds itself) until the socket took them. A socket that did
  // not take them all at once starts the slow-consumer clock, as on the plaintext path.
  const bool refused =
      stream->async_write(asio::buffer(buffer_.get(), length),
                          [self = c_.shared_from_this(), this, length](
                              std::error_code ec, std::size_t) { on_written(ec, length); });
  if (refused) c_.socket_refused();
}

void tls_writer::on_written(std::error_code ec, std::size_t length) {
  // What OpenSSL took of a write that failed may never have reached the socket: nothing of it
  // counts, and its frames go back whole.
  if (!ec) c_.count_sent(drain_.batch_.written(length));
  if (ec) c_.link_.lost(drain_.conn_, ec);
  if (ec || !c_.link_.up(drain_.conn_)) c_.settle_rest(drain_.batch_);
  drain_.run();
}

}  // namespace gatewayd::consumers
