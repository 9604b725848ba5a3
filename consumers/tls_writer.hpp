// A TLS consumer's writes, for the strand drain: the batch's frames copied into one buffer of the
// consumer's own and written with the TLS stream's async_write, so many frames share a record.
#pragma once

#include <cstddef>
#include <memory>
#include <system_error>
#include <vector>

#include <asio/buffer.hpp>

namespace gatewayd::consumers {

class consumer;
class strand_drain;

// The plaintext path hands the kernel the frames where they lie (gathered sendmsg). TLS cannot:
// each SSL_write makes at least one record, so writing frame by frame would cost a record (and
// its MAC and header) per frame. Frames that lie apart are copied into one contiguous buffer,
// reused for every write, that OpenSSL cuts into 16 KiB records; a run of neighbouring frames of
// direct_bytes or more (a supplier's read routed here in a row) is encrypted where it lies.
// Accounting is the plaintext path's: a frame counts as sent once the write that carried its last
// byte completed; on an error the frame cut by it and all after it go back to the front of the
// queue (write_batch, settle_rest), to be sent whole on the next connection.
class tls_writer {
 public:
  // One write carries at most this much: 16 records, and a small buffer per TLS consumer.
  static constexpr std::size_t max_bytes = 256 * 1024;
  // A run at least this long is encrypted in place rather than copied first: its records' own
  // overhead (a header and a tag per 16 KiB or less) stays under 1 %.
  static constexpr std::size_t direct_bytes = 4 * 1024;

  tls_writer(consumer& c, strand_drain& drain) noexcept : c_(c), drain_(drain) {}

  // Strand, with the writer role and a batch for a TLS connection: writes the next up to
  // max_bytes of the batch; when the write completed the drain runs on.
  void write();

 private:
  void on_written(std::error_code ec, std::size_t length);

  consumer& c_;
  strand_drain& drain_;
  std::unique_ptr<char[]> buffer_;          // max_bytes, made at the first TLS write and kept
  std::vector<asio::const_buffer> pieces_;  // of one write, in order; reused
};

}  // namespace gatewayd::consumers
