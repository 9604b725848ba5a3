// The strand drain model (the design): one writer at a time on the consumer's strand writes the
// queue with gathered writes that never block a thread; put() only starts it when none runs.
#pragma once

#include <cstdint>
#include <system_error>

#include "consumers/drain.hpp"
#include "consumers/write_batch.hpp"

namespace gatewayd::consumers {

class consumer;

class strand_drain final : public drain {
 public:
  explicit strand_drain(consumer& c) noexcept : c_(c) {}

  bool writer_per_caller() const noexcept override { return false; }
  void start() override;
  void resume(std::uint64_t conn) override;
  void release_socket() override {}  // nothing writes outside the strand

 private:
  // Strand, with the writer role: the next batch, or give the role up.
  void next();
  void write();
  void on_written(std::error_code ec, std::size_t n);

  consumer& c_;
  write_batch batch_;       // strand-only
  std::uint64_t conn_ = 0;  // the connection batch_ is written to
};

}  // namespace gatewayd::consumers
