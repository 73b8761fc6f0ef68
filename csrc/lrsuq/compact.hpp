// Trial indices H and lattice coordinates M in the narrowest integer type
// that holds a chunk's values, for the transfers between a GPU and the host
// (cuda/lrsuq_gpu.cu): 1, 2 or 4 bytes a trial index, 1, 2, 4 or 8 a
// coordinate, chosen from the chunk's range; written once for the host and
// the device (CEPAM_HD) and checked on the host by a round trip
// (tests/core/test_compact.py).  The host's side of a transfer (the range,
// packing before a copy to the device, widening after a copy back) also
// runs on the call's threads (the overloads taking `threads`), the same
// values for every count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/host_device.hpp"
#include "common/parallel.hpp"

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

// --- the host's side on several threads ---

// The parts of a chunk that `threads` threads work on: at most one a
// thread, each at least kPartElements values (a short chunk stays on the
// calling thread).
inline constexpr std::size_t kPartElements = std::size_t{1} << 16;
inline std::size_t part_count(std::size_t count, std::size_t coords, int threads) {
  const std::size_t most = static_cast<std::size_t>(std::max(threads, 1));
  return std::max<std::size_t>(1, std::min(most, (count + coords) / kPartElements));
}

// Calls part(t, h0, h1, m0, m1) for each part t of part_count(count,
// coords, threads), on up to `threads` threads: H[h0..h1) and M[m0..m1),
// which tile H[0..count) and M[0..coords) in proportion.
template <class Part>
void for_parts(std::size_t count, std::size_t coords, int threads, Part&& part) {
  const std::size_t T = part_count(count, coords, threads);
  parallel_for(static_cast<int>(T), T, [&](std::size_t t) {
    part(t, count * t / T, count * (t + 1) / T, coords * t / T, coords * (t + 1) / T);
  });
}

// range_of, pack and unpack on up to `threads` threads (the same results).
inline Range range_of(const std::uint32_t* H, std::size_t count, const std::int64_t* M,
                      std::size_t coords, int threads) {
  std::vector<Range> parts(part_count(count, coords, threads));
  for_parts(count, coords, threads, [&](std::size_t t, std::size_t h0, std::size_t h1,
                                        std::size_t m0, std::size_t m1) {
    parts[t] = range_of(H + h0, h1 - h0, M + m0, m1 - m0);
  });
  Range r{0, 0, 0};
  for (const Range& q : parts) {
    r.h_max = std::max(r.h_max, q.h_max);
    r.m_lo = std::min(r.m_lo, q.m_lo);
    r.m_hi = std::max(r.m_hi, q.m_hi);
  }
  return r;
}
inline void pack(const std::uint32_t* H, std::size_t count, const std::int64_t* M,
                 std::size_t coords, int wh, int wm, void* h_out, void* m_out, int threads) {
  for_parts(count, coords, threads, [&](std::size_t, std::size_t h0, std::size_t h1,
                                        std::size_t m0, std::size_t m1) {
    pack(H + h0, h1 - h0, M + m0, m1 - m0, wh, wm, static_cast<char*>(h_out) + h0 * wh,
         static_cast<char*>(m_out) + m0 * wm);
  });
}
inline void unpack(const void* h_in, std::size_t count, const void* m_in, std::size_t coords,
                   int wh, int wm, std::uint32_t* H, std::int64_t* M, int threads) {
  for_parts(count, coords, threads, [&](std::size_t, std::size_t h0, std::size_t h1,
                                        std::size_t m0, std::size_t m1) {
    unpack(static_cast<const char*>(h_in) + h0 * wh, h1 - h0,
           static_cast<const char*>(m_in) + m0 * wm, m1 - m0, wh, wm, H + h0, M + m0);
  });
}

}  // namespace cepam::compact
