// MSB-first bit writer and a bounds-checked bit cursor.
//
// The cursor treats its input as hostile: every read is checked against the
// end of its section, and a read past it returns a status (host and device
// code: coding/read_status.hpp; BitReader throws FormatError with its
// words).  Runs of zero bits are counted a word at a time with an explicit
// limit, so no input can make a read loop unboundedly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "coding/read_status.hpp"
#include "common/errors.hpp"
#include "common/host_device.hpp"

#if defined(_MSC_VER)
#include <intrin.h>
#include <stdlib.h>
#endif

namespace cepam {

// Number of leading zero bits of a non-zero 64-bit word (host and device:
// coding/symbol_core.hpp).
CEPAM_HD inline int count_leading_zeros(std::uint64_t w) {
#if defined(__CUDA_ARCH__)
  return __clzll(static_cast<long long>(w));
#elif defined(_MSC_VER) && !defined(__clang__)
  unsigned long index;
  _BitScanReverse64(&index, w);
  return 63 - static_cast<int>(index);
#else
  return __builtin_clzll(w);
#endif
}

// Bit length of v (0 for v = 0); branch-free (zero is common among the
// Golomb coder's coordinates): v | 1 has the bit length of v except for
// v = 0.
CEPAM_HD inline int bit_length64(std::uint64_t v) {
  return 64 - count_leading_zeros(v | 1) - static_cast<int>(v == 0);
}

// 2v for v >= 0, -2v - 1 otherwise (the coders' signed integers), and back.
CEPAM_HD inline std::uint64_t zigzag64(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
CEPAM_HD inline std::int64_t unzigzag64(std::uint64_t z) {
  return static_cast<std::int64_t>(z >> 1) ^ -static_cast<std::int64_t>(z & 1);
}

// Big-endian 64-bit load and store: one unaligned access and a byte swap
// where the compiler has a byte-swap intrinsic, bytes one by one otherwise
// (and on a GPU, where the load runs too: coding/golomb_read.hpp).
CEPAM_HD inline std::uint64_t load_be64(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  std::uint64_t w = 0;
  for (int i = 0; i < 8; ++i) w = (w << 8) | p[i];
  return w;
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__)
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
#elif defined(_MSC_VER)
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return _byteswap_uint64(w);  // MSVC targets are little-endian
#else
  std::uint64_t w = 0;
  for (int i = 0; i < 8; ++i) w = (w << 8) | p[i];
  return w;
#endif
}

inline void store_be64(std::uint8_t* p, std::uint64_t w) {
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  std::memcpy(p, &w, sizeof w);
#elif defined(_MSC_VER)
  w = _byteswap_uint64(w);
  std::memcpy(p, &w, sizeof w);
#else
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(w >> (56 - 8 * i));
#endif
}

// Little-endian integers of `bytes` bytes (at most 8): the payload body's
// lengths and parameters.
inline std::uint64_t load_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}
inline void store_le(std::uint8_t* p, std::uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}

class BitWriter {
 public:
  // Appends to out (which may already hold earlier sections).
  explicit BitWriter(std::vector<std::uint8_t>& out)
      : out_(out), buf_(out.data()), cap_(out.size()), start_(out.size()), used_(out.size()) {}

  // Appends the low `nbits` bits of value, most significant first;
  // 1 <= nbits <= 56.
  void put(std::uint64_t value, int nbits) {
    if (cap_ - used_ < 8) {
      buf_ = grow(out_, used_);
      cap_ = out_.size();
    }
    // acc_ holds the nacc_ < 8 bits not yet in a whole byte, left-aligned.
    acc_ |= (value << (64 - nbits)) >> nacc_;
    nacc_ += nbits;
    // Store all 8 bytes of the accumulator (the bytes past the pending bits
    // are zeros, overwritten by later puts) and keep the last partial byte.
    store_be64(buf_ + used_, acc_);
    const int whole = nacc_ >> 3;  // at most 7
    used_ += static_cast<std::size_t>(whole);
    acc_ <<= 8 * whole;
    nacc_ &= 7;
  }
  // Appends 1 to 64 bits.
  void put_long(std::uint64_t value, int nbits) {
    if (nbits > 56) {
      put(value >> 32, nbits - 32);
      put(value & 0xffffffffu, 32);
    } else {
      put(value, nbits);
    }
  }
  void put_zeros(std::uint64_t count) {
    for (; count >= 56; count -= 56) put(0, 56);
    if (count > 0) put(0, static_cast<int>(count));
  }
  // Pads with zero bits to a byte boundary (the partial byte is already in
  // place) and trims the buffer.
  void finish() {
    if (nacc_ > 0) {
      ++used_;
      acc_ = 0;
      nacc_ = 0;
    }
    out_.resize(used_);
    buf_ = out_.data();
    cap_ = used_;
  }
  // Bits written so far; call before finish() (padding is not counted).
  std::uint64_t bits() const {
    return 8 * static_cast<std::uint64_t>(used_ - start_) + static_cast<std::uint64_t>(nacc_);
  }

 private:
  // Enlarges out (geometrically) so that at least 8 bytes follow `used`.
  // A free function, so that the writer's state can live in registers.
  static std::uint8_t* grow(std::vector<std::uint8_t>& out, std::size_t used) {
    out.resize(2 * out.size() > used + 64 ? 2 * out.size() : used + 64);
    return out.data();
  }

  std::vector<std::uint8_t>& out_;
  std::uint8_t* buf_;  // out_.data(), cached
  std::size_t cap_;    // out_.size(), cached
  std::size_t start_;  // out_.size() before this section
  std::size_t used_;   // bytes of out_ holding whole bytes of output
  std::uint64_t acc_ = 0;
  int nacc_ = 0;
};

// Bits [0, nbits) of data (which holds ceil(nbits / 8) bytes), read from pos.
struct BitCursor {
  const std::uint8_t* data;
  std::uint64_t nbits, pos;
};

// The unchecked fast path: while at least kPlentyBits bits remain,
// bits_window returns the next 64 bits, of which at least the first 57 are
// the section's (the 8 bytes it loads lie inside it).
inline constexpr std::uint64_t kPlentyBits = 128;
CEPAM_HD inline bool bits_plenty(const BitCursor& r) { return r.nbits - r.pos >= kPlentyBits; }
CEPAM_HD inline std::uint64_t bits_window(const BitCursor& r) {
  return load_be64(r.data + (r.pos >> 3)) << (r.pos & 7);
}

// The next `nbits` (1 to 57) bits without consuming them; bits past the
// end read as zero.
CEPAM_HD inline std::uint64_t bits_peek(const BitCursor& r, int nbits) {
  const std::uint64_t byte = r.pos >> 3;
  const int shift = static_cast<int>(r.pos & 7);
  const std::uint64_t nbytes = (r.nbits + 7) >> 3;
  std::uint64_t w = 0;
  if (byte + 8 <= nbytes) {
    w = load_be64(r.data + byte);
  } else {
    for (std::uint64_t i = 0; i < 8; ++i)
      w = (w << 8) | (byte + i < nbytes ? r.data[byte + i] : 0u);
  }
  return (w << shift) >> (64 - nbits);
}

// Consumes `nbits` (0 to 57) bits into *v.
CEPAM_HD inline ReadStatus bits_get(BitCursor& r, int nbits, std::uint64_t* v) {
  if (nbits == 0) {
    *v = 0;
    return kReadOk;
  }
  if (static_cast<std::uint64_t>(nbits) > r.nbits - r.pos) return kReadBitsTruncated;
  *v = bits_peek(r, nbits);
  r.pos += static_cast<std::uint64_t>(nbits);
  return kReadOk;
}

// Consumes 0 to 64 bits into *v.
CEPAM_HD inline ReadStatus bits_get_long(BitCursor& r, int nbits, std::uint64_t* v) {
  if (nbits <= 32) return bits_get(r, nbits, v);
  std::uint64_t hi = 0, lo = 0;
  ReadStatus st = bits_get(r, nbits - 32, &hi);
  if (st == kReadOk) st = bits_get(r, 32, &lo);
  *v = (hi << 32) | lo;
  return st;
}

// Counts and consumes zero bits up to and including the next one bit, at
// most `limit` zeros.
CEPAM_HD inline ReadStatus bits_zeros_then_one(BitCursor& r, std::uint64_t limit,
                                               std::uint64_t* zeros) {
  *zeros = 0;
  for (;;) {
    if (r.pos >= r.nbits) return kReadPrefixTruncated;
    const std::uint64_t window = bits_peek(r, 32);
    if (window != 0) {
      const int lz = count_leading_zeros(window) - 32;
      *zeros += static_cast<std::uint64_t>(lz);
      if (*zeros > limit) return kReadPrefixTooLong;
      if (static_cast<std::uint64_t>(lz) + 1 > r.nbits - r.pos) return kReadBitsTruncated;
      r.pos += static_cast<std::uint64_t>(lz) + 1;
      return kReadOk;
    }
    *zeros += 32;
    if (*zeros > limit) return kReadPrefixTooLong;
    if (32 > r.nbits - r.pos) return kReadBitsTruncated;
    r.pos += 32;
  }
}

// The bounds-checked reader (host code: it throws FormatError with
// read_message's words for the cursor's statuses), for the source model's
// knots (coding/source_model.cpp).
class BitReader {
 public:
  // Reads bits [0, nbits) of data, which holds at least ceil(nbits / 8) bytes.
  BitReader(const std::uint8_t* data, std::uint64_t nbits) : r_{data, nbits, 0} {}

  std::uint64_t position() const { return r_.pos; }
  std::uint64_t remaining() const { return r_.nbits - r_.pos; }

  std::uint64_t get(int nbits) {
    std::uint64_t v = 0;
    check(bits_get(r_, nbits, &v));
    return v;
  }
  std::uint64_t get_long(int nbits) {
    std::uint64_t v = 0;
    check(bits_get_long(r_, nbits, &v));
    return v;
  }
  // Counts and consumes zero bits up to and including the next one bit;
  // throws FormatError if more than `limit` zeros come first.
  std::uint64_t zeros_then_one(std::uint64_t limit) {
    std::uint64_t zeros = 0;
    check(bits_zeros_then_one(r_, limit, &zeros));
    return zeros;
  }

 private:
  static void check(ReadStatus st) {
    if (st != kReadOk) throw FormatError(read_message(st));
  }
  BitCursor r_;
};

}  // namespace cepam
