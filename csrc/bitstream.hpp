// MSB-first bit writer and a bounds-checked bit reader.
//
// The reader treats its input as hostile: every read is checked against the
// end of its section, and a read past it throws FormatError.  Runs of zero
// bits are counted a word at a time with an explicit limit, so no input can
// make a read loop unboundedly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "errors.hpp"

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

namespace cepam {

// Number of leading zero bits of a non-zero 64-bit word.
inline int count_leading_zeros(std::uint64_t w) {
#if defined(_MSC_VER) && !defined(__clang__)
  unsigned long index;
  _BitScanReverse64(&index, w);
  return 63 - static_cast<int>(index);
#else
  return __builtin_clzll(w);
#endif
}

class BitWriter {
 public:
  explicit BitWriter(std::vector<std::uint8_t>& out) : out_(out) {}

  // Appends the low `nbits` bits of value, most significant first; nbits <= 32.
  void put(std::uint64_t value, int nbits) {
    acc_ = (acc_ << nbits) | (value & ((std::uint64_t{1} << nbits) - 1));
    nacc_ += nbits;
    bits_ += static_cast<std::uint64_t>(nbits);
    if (nacc_ >= 32) {
      const std::uint32_t word = static_cast<std::uint32_t>(acc_ >> (nacc_ - 32));
      out_.push_back(static_cast<std::uint8_t>(word >> 24));
      out_.push_back(static_cast<std::uint8_t>(word >> 16));
      out_.push_back(static_cast<std::uint8_t>(word >> 8));
      out_.push_back(static_cast<std::uint8_t>(word));
      nacc_ -= 32;
    }
  }
  // Appends up to 64 bits.
  void put_long(std::uint64_t value, int nbits) {
    if (nbits > 32) {
      put(value >> 32, nbits - 32);
      put(value & 0xffffffffu, 32);
    } else {
      put(value, nbits);
    }
  }
  void put_zeros(std::uint64_t count) {
    for (; count >= 32; count -= 32) put(0, 32);
    put(0, static_cast<int>(count));
  }
  // Pads with zero bits to a byte boundary.
  void finish() {
    while (nacc_ > 0) {
      const int take = nacc_ >= 8 ? 8 : nacc_;
      const std::uint64_t byte = (acc_ >> (nacc_ - take)) << (8 - take);
      out_.push_back(static_cast<std::uint8_t>(byte));
      nacc_ -= take;
    }
  }
  std::uint64_t bits() const { return bits_; }

 private:
  std::vector<std::uint8_t>& out_;
  std::uint64_t acc_ = 0;
  int nacc_ = 0;
  std::uint64_t bits_ = 0;
};

class BitReader {
 public:
  // Reads bits [0, nbits) of data, which holds at least ceil(nbits / 8) bytes.
  BitReader(const std::uint8_t* data, std::uint64_t nbits) : data_(data), nbits_(nbits) {}

  std::uint64_t position() const { return pos_; }
  std::uint64_t remaining() const { return nbits_ - pos_; }

  // Next `nbits` (<= 57) bits without consuming them; bits past the end read
  // as zero.
  std::uint64_t peek(int nbits) const {
    const std::uint64_t byte = pos_ >> 3;
    const int shift = static_cast<int>(pos_ & 7);
    const std::uint64_t nbytes = (nbits_ + 7) >> 3;
    std::uint64_t w = 0;
    if (byte + 8 <= nbytes) {
      for (int i = 0; i < 8; ++i) w = (w << 8) | data_[byte + static_cast<std::uint64_t>(i)];
    } else {
      for (std::uint64_t i = 0; i < 8; ++i)
        w = (w << 8) | (byte + i < nbytes ? data_[byte + i] : 0u);
    }
    return (w << shift) >> (64 - nbits);
  }

  std::uint64_t get(int nbits) {
    if (nbits == 0) return 0;
    need(static_cast<std::uint64_t>(nbits));
    const std::uint64_t v = peek(nbits);
    pos_ += static_cast<std::uint64_t>(nbits);
    return v;
  }
  std::uint64_t get_long(int nbits) {
    if (nbits > 32) {
      const std::uint64_t hi = get(nbits - 32);
      return (hi << 32) | get(32);
    }
    return get(nbits);
  }

  // Counts and consumes zero bits up to and including the next one bit;
  // throws FormatError if more than `limit` zeros come first.
  std::uint64_t zeros_then_one(std::uint64_t limit) {
    std::uint64_t zeros = 0;
    for (;;) {
      if (pos_ >= nbits_) throw FormatError("bitstream truncated inside a prefix code");
      const std::uint64_t window = peek(32);
      if (window != 0) {
        const int lz = count_leading_zeros(window) - 32;
        zeros += static_cast<std::uint64_t>(lz);
        if (zeros > limit) throw FormatError("prefix code longer than allowed");
        need(static_cast<std::uint64_t>(lz) + 1);
        pos_ += static_cast<std::uint64_t>(lz) + 1;
        return zeros;
      }
      zeros += 32;
      if (zeros > limit) throw FormatError("prefix code longer than allowed");
      need(32);
      pos_ += 32;
    }
  }

 private:
  void need(std::uint64_t nbits) const {
    if (nbits > nbits_ - pos_) throw FormatError("bitstream truncated");
  }
  const std::uint8_t* data_;
  std::uint64_t nbits_;
  std::uint64_t pos_ = 0;
};

}  // namespace cepam
