#include "consumers/frame_packer.hpp"

#include <algorithm>
#include <cstring>

namespace gatewayd::consumers {

frame_slice frame_packer::pack(const frame_slice& f) {
  if (!chunk_ || used_ + f.size > chunk_->capacity()) {
    chunk_ = protocol::chunk_ptr(protocol::frame_chunk::acquire(
        std::max<std::size_t>(protocol::frame_chunk::standard_capacity, f.size)));
    used_ = 0;
  }
  std::memcpy(chunk_->data() + used_, f.data(), f.size);
  chunk_->add_refs(1);
  const frame_slice copy{chunk_.get(), used_, f.size, f.confirm};
  used_ += f.size;
  return copy;
}

}  // namespace gatewayd::consumers
