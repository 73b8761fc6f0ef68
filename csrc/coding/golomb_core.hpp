// The Golomb body's codes (payload/golomb_body.hpp), written once for the
// CPU's coder and a GPU: a trial index's Golomb code, a lattice
// coordinate's exp-Golomb code, and the units of work in which a GPU codes
// a body's segments at once (counted, then written at their bit offsets
// into the zeroed body).  The CPU's put_h_codes and put_m_codes code each
// value with h_code and m_code, so its bytes are these functions' bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/bitstream.hpp"
#include "common/host_device.hpp"

namespace cepam {

// A prefix code: `zeros` zero bits, then the low `bits` bits of tail
// (bits <= 57; the first of them a one).  zeros < 2^16: a trial index's
// (at most kTrialCap) or a coordinate's (at most 55).
struct PrefixCode {
  int zeros;
  std::uint64_t tail;
  int bits;
};

// The Golomb code of parameter g > 0 of H - 1: the quotient in unary (as
// zeros ended by a one), the remainder r in truncated binary (b - 1 bits
// for r < u, else b bits of r + u).
struct GolombCode {
  std::uint32_t g;
  int b;
  std::uint64_t u;
  int log2g;  // for a power of two (often 1): divide by shifting
  bool pow2;
};

CEPAM_HD inline GolombCode golomb_code(std::uint32_t g) {
  GolombCode c{};
  c.g = g;
  c.b = bit_length64(static_cast<std::uint64_t>(g) - 1);
  c.u = (std::uint64_t{1} << c.b) - g;
  c.pow2 = (g & (g - 1)) == 0;
  c.log2g = bit_length64(g) - 1;
  return c;
}

// The code of trial index H in [1, kTrialCap] (c.g > 0).
CEPAM_HD inline PrefixCode h_code(const GolombCode& c, std::uint32_t H) {
  const std::uint64_t v = H - 1;
  const std::uint64_t q = c.pow2 ? v >> c.log2g : v / c.g;
  const std::uint64_t r = c.pow2 ? v & (c.g - 1) : v % c.g;
  int rbits = 0;
  std::uint64_t rcode = r;
  if (c.b > 0) {
    rbits = r < c.u ? c.b - 1 : c.b;
    rcode = r < c.u ? r : r + c.u;
  }
  return {static_cast<int>(q), (std::uint64_t{1} << rbits) | rcode, 1 + rbits};
}

// The order-k exp-Golomb code of zigzag(m), |m| <= kMaxAbsM: v = zigzag(m)
// + 2^k in bit_length(v) bits after bit_length(v) - k - 1 zeros.
CEPAM_HD inline PrefixCode m_code(int k, std::int64_t m) {
  const std::uint64_t v = zigzag64(m) + (std::uint64_t{1} << k);
  const int len = bit_length64(v);
  return {len - k - 1, v, len};
}

// --- A GPU's units of work ------------------------------------------------
//
// Segment s (sub-vectors [s S, min(N, (s + 1) S))) in units of
// kGolombUnitSubvectors sub-vectors; every segment has the units of a
// whole one, those past its end empty.  A unit counts its codes' bits
// (golomb_unit_h_bits, then, each segment's order k chosen from its
// coordinates' bit lengths, golomb_unit_m_bits), and, its sections' bit offsets known
// (the units' counts summed in order on the host), writes them
// (golomb_unit_write) into the zeroed body by or_word(w, bits): OR bits
// into bytes [4w, 4w + 4) of the body (the first byte in the low bits),
// atomic where units share a word (on a GPU).

inline constexpr std::size_t kGolombUnitSubvectors = 256;

struct GolombUnits {
  std::size_t N, S, n;
  std::size_t per_segment;  // units a segment
  std::size_t segments;
  std::size_t count;
};

CEPAM_HD inline GolombUnits golomb_units(std::size_t N, std::size_t S, std::size_t n) {
  GolombUnits u{};
  u.N = N;
  u.S = S;
  u.n = n;
  u.per_segment = (S + kGolombUnitSubvectors - 1) / kGolombUnitSubvectors;
  u.segments = (N + S - 1) / S;
  u.count = u.segments * u.per_segment;
  return u;
}

// Unit `unit`'s sub-vectors [*j0, *j1) (empty past its segment's end).
CEPAM_HD inline void golomb_unit_range(const GolombUnits& u, std::size_t unit, std::size_t* j0,
                                       std::size_t* j1) {
  const std::size_t s = unit / u.per_segment, r = unit % u.per_segment;
  const std::size_t end = u.N - s * u.S < u.S ? u.N : s * u.S + u.S;
  const std::size_t first = s * u.S + r * kGolombUnitSubvectors;
  *j0 = first < end ? first : end;
  *j1 = end - *j0 < kGolombUnitSubvectors ? end : *j0 + kGolombUnitSubvectors;
}

// The bits of the unit's trial-index codes (none where g = 0), and adds
// each of its coordinates to lengths[bit_length(zigzag(m))] by add(b).
template <class Add>
CEPAM_HD inline std::uint64_t golomb_unit_h_bits(const GolombUnits& u, const GolombCode& c,
                                                 std::size_t unit, const std::uint32_t* H,
                                                 const std::int64_t* M, Add&& add) {
  std::size_t j0 = 0, j1 = 0;
  golomb_unit_range(u, unit, &j0, &j1);
  std::uint64_t bits = 0;
  for (std::size_t j = j0; c.g != 0 && j < j1; ++j) {
    const PrefixCode code = h_code(c, H[j]);
    bits += static_cast<std::uint64_t>(code.zeros + code.bits);
  }
  for (std::size_t i = j0 * u.n; i < j1 * u.n; ++i) add(bit_length64(zigzag64(M[i])));
  return bits;
}

// The bits of the unit's coordinate codes of order k.
CEPAM_HD inline std::uint64_t golomb_unit_m_bits(const GolombUnits& u, int k, std::size_t unit,
                                                 const std::int64_t* M) {
  std::size_t j0 = 0, j1 = 0;
  golomb_unit_range(u, unit, &j0, &j1);
  std::uint64_t bits = 0;
  for (std::size_t i = j0 * u.n; i < j1 * u.n; ++i) {
    const PrefixCode code = m_code(k, M[i]);
    bits += static_cast<std::uint64_t>(code.zeros + code.bits);
  }
  return bits;
}

// The low `bits` bits of tail (bits <= 57), MSB-first, at bit `pos` of the
// body (bit 7 of a byte first), by or_word.
template <class OrWord>
CEPAM_HD inline void or_bits(std::uint64_t pos, std::uint64_t tail, int bits, OrWord&& or_word) {
  while (bits > 0) {
    const int off = static_cast<int>(pos & 31);
    const int take = 32 - off < bits ? 32 - off : bits;
    const std::uint32_t chunk =
        static_cast<std::uint32_t>((tail >> (bits - take)) & ((std::uint64_t{1} << take) - 1));
    // Bits [off, off + take) of the word's big-endian value, then its bytes
    // in memory order (the first in the low bits).
    const std::uint32_t be = chunk << (32 - off - take);
    const std::uint32_t le =
        (be >> 24) | ((be >> 8) & 0xff00u) | ((be << 8) & 0xff0000u) | (be << 24);
    or_word(pos >> 5, le);
    pos += static_cast<std::uint64_t>(take);
    bits -= take;
  }
}

// Writes the unit's codes: its trial indices' at bit h_pos (none where
// g = 0), its coordinates' (order k) at bit m_pos.
template <class OrWord>
CEPAM_HD inline void golomb_unit_write(const GolombUnits& u, const GolombCode& c, int k,
                                       std::size_t unit, const std::uint32_t* H,
                                       const std::int64_t* M, std::uint64_t h_pos,
                                       std::uint64_t m_pos, OrWord&& or_word) {
  std::size_t j0 = 0, j1 = 0;
  golomb_unit_range(u, unit, &j0, &j1);
  for (std::size_t j = j0; c.g != 0 && j < j1; ++j) {
    const PrefixCode code = h_code(c, H[j]);
    or_bits(h_pos + static_cast<std::uint64_t>(code.zeros), code.tail, code.bits, or_word);
    h_pos += static_cast<std::uint64_t>(code.zeros + code.bits);
  }
  for (std::size_t i = j0 * u.n; i < j1 * u.n; ++i) {
    const PrefixCode code = m_code(k, M[i]);
    or_bits(m_pos + static_cast<std::uint64_t>(code.zeros), code.tail, code.bits, or_word);
    m_pos += static_cast<std::uint64_t>(code.zeros + code.bits);
  }
}

}  // namespace cepam
