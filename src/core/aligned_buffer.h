// A heap buffer aligned for SIMD loads, zero-initialised, that can grow (contents are not kept on growth).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace tt {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { reserve(bytes); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Returns true when the buffer had to be (re)allocated.
  bool reserve(size_t bytes) {
    if (bytes <= size_ && data_) return false;
    std::free(data_);
    size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded == 0) rounded = kAlign;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded));
    if (!data_) throw std::bad_alloc();
    std::memset(data_, 0, rounded);
    size_ = bytes;
    return true;
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kAlign = 64;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tt
