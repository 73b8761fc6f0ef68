// Trial indices H and lattice coordinates M in the narrowest integer type
// that holds a chunk's values, for the transfers between a GPU and the host
// (cuda/lrsuq_gpu.cu): 1, 2 or 4 bytes a trial index, 1, 2, 4 or 8 a
// coordinate, chosen from the chunk's range; written once for the host and
// the device (CEPAM_HD) and checked on the host by a round trip
// (tests/core/test_compact.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/host_device.hpp"

namespace cepam::compact {

// Bytes of the narrowest unsigned type holding every value in [0, hi].
CEPAM_HD inline int unsigned_width(std::uint64_t hi) {
  return hi <= 0xffu ? 1 : hi <= 0xffffu ? 2 : hi <= 0xffffffffu ? 4 : 8;
}

// Bytes of the narrowest signed type holding every value in [lo, hi].
CEPAM_HD inline int signed_width(std::int64_t lo, std::int64_t hi) {
  const auto fits = [&](std::int64_t bound) { return lo >= -bound - 1 && hi <= bound; };
  return fits(0x7f) ? 1 : fits(0x7fff) ? 2 : fits(0x7fffffff) ? 4 : 8;
}

// Element i of a packed array of `width`-byte integers (1, 2, 4 or 8),
// signed or unsigned: the element type of each width, one switch.
template <bool Signed>
struct Packed {
  template <class U>
  using Like = std::conditional_t<Signed, std::make_signed_t<U>, U>;
  using Value = Like<std::uint64_t>;
  CEPAM_HD static void put(void* out, std::size_t i, int width, Value v) {
    switch (width) {
      case 1: static_cast<Like<std::uint8_t>*>(out)[i] = static_cast<Like<std::uint8_t>>(v); return;
      case 2: static_cast<Like<std::uint16_t>*>(out)[i] = static_cast<Like<std::uint16_t>>(v); return;
      case 4: static_cast<Like<std::uint32_t>*>(out)[i] = static_cast<Like<std::uint32_t>>(v); return;
      default: static_cast<Value*>(out)[i] = v; return;
    }
  }
  CEPAM_HD static Value get(const void* in, std::size_t i, int width) {
    switch (width) {
      case 1: return static_cast<const Like<std::uint8_t>*>(in)[i];
      case 2: return static_cast<const Like<std::uint16_t>*>(in)[i];
      case 4: return static_cast<const Like<std::uint32_t>*>(in)[i];
      default: return static_cast<const Value*>(in)[i];
    }
  }
};
using PackedUnsigned = Packed<false>;
using PackedSigned = Packed<true>;

// The range of a chunk: the largest H, the smallest and largest M.
struct Range {
  std::uint64_t h_max;
  std::int64_t m_lo, m_hi;
};

CEPAM_HD inline Range range_of(const std::uint32_t* H, std::size_t count, const std::int64_t* M,
                               std::size_t coords) {
  Range r{0, 0, 0};
  for (std::size_t i = 0; i < count; ++i) r.h_max = H[i] > r.h_max ? H[i] : r.h_max;
  for (std::size_t i = 0; i < coords; ++i) {
    r.m_lo = M[i] < r.m_lo ? M[i] : r.m_lo;
    r.m_hi = M[i] > r.m_hi ? M[i] : r.m_hi;
  }
  return r;
}

// Packs H[0..count) and M[0..coords) at the widths of their range, and
// unpacks them (the host twin of the transfers: tests/core/test_compact.py).
CEPAM_HD inline void pack(const std::uint32_t* H, std::size_t count, const std::int64_t* M,
                          std::size_t coords, int wh, int wm, void* h_out, void* m_out) {
  for (std::size_t i = 0; i < count; ++i) PackedUnsigned::put(h_out, i, wh, H[i]);
  for (std::size_t i = 0; i < coords; ++i) PackedSigned::put(m_out, i, wm, M[i]);
}
CEPAM_HD inline void unpack(const void* h_in, std::size_t count, const void* m_in,
                            std::size_t coords, int wh, int wm, std::uint32_t* H,
                            std::int64_t* M) {
  for (std::size_t i = 0; i < count; ++i)
    H[i] = static_cast<std::uint32_t>(PackedUnsigned::get(h_in, i, wh));
  for (std::size_t i = 0; i < coords; ++i) M[i] = PackedSigned::get(m_in, i, wm);
}

}  // namespace cepam::compact
