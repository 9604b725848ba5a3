// A growable run of bytes that does not zero what it grows into: records are written into it
// by a cipher or a copy, never read before they are written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>

namespace gatewayd::net {

class byte_buffer {
 public:
  char* data() noexcept { return data_.get(); }
  const char* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t capacity() const noexcept { return capacity_; }
  void clear() noexcept { size_ = 0; }
  // Gives the memory back (an idle connection holds none).
  void release() noexcept {
    data_.reset();
    size_ = capacity_ = 0;
  }

  // `n` more bytes at the end, not yet written: the caller fills them (or gives back what it
  // did not use with shrink).
  char* extend(std::size_t n) {
    if (capacity_ - size_ < n) grow(size_ + n);
    char* at = data_.get() + size_;
    size_ += n;
    return at;
  }
  void shrink(std::size_t n) noexcept { size_ -= std::min(n, size_); }
  void append(const char* bytes, std::size_t n) {
    if (n) std::memcpy(extend(n), bytes, n);
  }
  void erase_front(std::size_t n) noexcept {
    n = std::min(n, size_);
    if (n < size_) std::memmove(data_.get(), data_.get() + n, size_ - n);
    size_ -= n;
  }
  void swap(byte_buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  void grow(std::size_t wanted) {
    const std::size_t capacity = std::max(wanted, 2 * capacity_);
    std::unique_ptr<char[]> bigger(new char[capacity]);
    if (size_) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace gatewayd::net
