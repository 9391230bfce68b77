// Reads a fuzzer's input as a sequence of small fields. Every read succeeds:
// past the end, numbers read as zero and byte runs come back short, so a
// target never needs to check lengths and every input means something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ringlet::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return at_ >= size_; }
  size_t left() const { return size_ - at_; }

  uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
  // Little-endian.
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  std::span<const uint8_t> bytes(size_t n) {
    const size_t take = n < left() ? n : left();
    std::span<const uint8_t> out(data_ + at_, take);
    at_ += take;
    return out;
  }
  std::span<const uint8_t> rest() { return bytes(left()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace ringlet::fuzz
