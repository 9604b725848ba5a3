#include "consumers/tls_writer.hpp"

#include <algorithm>
#include <cstring>

#include "consumers/consumer.hpp"
#include "consumers/strand_drain.hpp"

namespace gatewayd::consumers {

void tls_writer::write() {
  auto stream = c_.link_.secure_stream();
  if (!buffer_) buffer_ = std::make_unique<char[]>(max_bytes);
  pieces_.clear();
  std::size_t length = 0;
  std::size_t gathered_from = 0, gathered_to = 0;  // small runs copied since the last piece
  const auto cut_gathered = [&] {
    if (gathered_to == gathered_from) return;
    pieces_.emplace_back(buffer_.get() + gathered_from, gathered_to - gathered_from);
    gathered_from = gathered_to;
  };
  for (const iovec& v : drain_.batch_.unwritten()) {
    const std::size_t take = std::min(v.iov_len, max_bytes - length);
    if (take >= direct_bytes) {
      cut_gathered();
      pieces_.emplace_back(v.iov_base, take);
    } else {
      std::memcpy(buffer_.get() + gathered_to, v.iov_base, take);
      gathered_to += take;
    }
    length += take;
    if (length == max_bytes) break;
  }
  cut_gathered();
  // The channel encrypts the pieces now, into records of its own: the handler holds the
  // consumer (and the channel holds itself) until the socket took them. A socket that did not
  // take them all at once starts the slow-consumer clock, as on the plaintext path.
  const bool refused = stream->async_write(
      pieces_, [self = c_.shared_from_this(), this, length](std::error_code ec, std::size_t) {
        on_written(ec, length);
      });
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
