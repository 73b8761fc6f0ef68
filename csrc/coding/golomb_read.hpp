// A Golomb body's sections read code by code, written once for the CPU's
// reader (payload/golomb_body.hpp's GolombBodyReader, which throws
// read_message's words) and a GPU's decoder (payload/golomb_segment.hpp,
// which returns the statuses): the trial indices' Golomb codes and the
// coordinates' exp-Golomb codes (coding/golomb_core.hpp writes them), each
// with a fast path for the codes wholly inside a 64-bit window and a
// checked path near the section's end and for long or invalid codes, on
// coding/bitstream.hpp's bit cursor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/bitstream.hpp"
#include "coding/golomb_core.hpp"
#include "coding/read_status.hpp"
#include "common/format_limits.hpp"
#include "common/host_device.hpp"

namespace cepam {

namespace golomb_read_detail {

// The reads on a cursor the caller keeps in a local variable (so that the
// compiler keeps its fields in registers while H and M are written: M's
// int64 stores may alias a cursor's uint64 fields in memory).
CEPAM_HD inline ReadStatus read_h(BitCursor& r, std::uint32_t g, std::size_t N,
                                  std::uint32_t* H) {
  if (g == 0) {
    for (std::size_t j = 0; j < N; ++j) H[j] = 1;
    return kReadOk;
  }
  const std::uint64_t max_q = (kTrialCap - 1) / g;
  // (Computed here, from g, so that the compiler sees b = 0 exactly where
  // g = 1, the commonest parameter: taken from the caller, g = 1 read 27%
  // slower.)
  const GolombCode c = golomb_code(g);
  const int b = c.b;
  const std::uint64_t u = c.u;
  for (std::size_t j = 0; j < N;) {
    if (bits_plenty(r)) {
      // Fast path, as for M below: the codes wholly inside the window (an
      // invalid one is left to the checked path, so that this loop has one
      // way out).
      std::uint64_t w = bits_window(r);
      const int valid = 64 - static_cast<int>(r.pos & 7);
      int used = 0;
      for (; j < N && w != 0; ++j) {
        const int zeros = count_leading_zeros(w);
        if (static_cast<std::uint64_t>(zeros) > max_q) break;
        // After the zeros and the one: b - 1 bits, or b if those bits are
        // >= u (b <= 16).
        const std::uint64_t after = (w << zeros) << 1;
        std::uint64_t rem = 0;
        int total = zeros + 1;
        if (b > 0) {
          rem = b > 1 ? after >> (65 - b) : 0;
          if (rem >= u) {
            rem = (after >> (64 - b)) - u;
            total += b;
          } else {
            total += b - 1;
          }
        }
        if (total > valid - used) break;
        const std::uint64_t v = static_cast<std::uint64_t>(zeros) * g + rem;
        if (v >= kTrialCap) break;  // (the checked path refuses it)
        H[j] = static_cast<std::uint32_t>(v + 1);
        w = after << (total - zeros - 1);  // w << total, as after = w << (zeros + 1)
        used += total;
      }
      if (used > 0) {
        r.pos += static_cast<std::uint64_t>(used);
        continue;
      }
    }
    // Checked path: near the end of the section, and for long or invalid codes.
    std::uint64_t q = 0, rem = 0;
    ReadStatus st = bits_zeros_then_one(r, max_q, &q);
    if (st != kReadOk) return st;
    if (b > 0) {
      if ((st = bits_get(r, b - 1, &rem)) != kReadOk) return st;
      if (rem >= u) {
        std::uint64_t bit = 0;
        if ((st = bits_get(r, 1, &bit)) != kReadOk) return st;
        rem = ((rem << 1) | bit) - u;
      }
    }
    const std::uint64_t v = q * g + rem;
    if (v >= kTrialCap) return kReadTrialAboveCap;
    H[j] = static_cast<std::uint32_t>(v + 1);
    ++j;
  }
  return kReadOk;
}

CEPAM_HD inline ReadStatus read_m(BitCursor& r, int k, std::size_t count, std::int64_t* M) {
  const std::uint64_t offset = std::uint64_t{1} << k;
  // |M| <= 2^53 means zigzag(M) <= 2^54, so a code is at most
  // bit_length(2^54 + 2^k) <= 56 bits long.
  const std::uint64_t max_zigzag = zigzag64(kMaxAbsM);
  const int max_len = bit_length64(max_zigzag + offset);
  const int max_zeros = max_len - k - 1;
  for (std::size_t i = 0; i < count;) {
    if (bits_plenty(r)) {
      // Fast path: decode the codes that lie wholly inside the next 64-bit
      // window (its first `valid` >= 57 bits are stream bits, and plenty
      // remain after them).  For such codes, with a valid prefix, the
      // checked reads below would neither fail nor read anything else.
      std::uint64_t w = bits_window(r);
      const int valid = 64 - static_cast<int>(r.pos & 7);
      int used = 0;
      for (; i < count && w != 0; ++i) {
        const int zeros = count_leading_zeros(w);
        const int len = zeros + k + 1;  // bits of v, after `zeros` zeros
        const int total = zeros + len;
        if (zeros > max_zeros || total > valid - used) break;
        const std::uint64_t at_v = w << zeros;  // v left-aligned
        const std::uint64_t z = (at_v >> (64 - len)) - offset;
        if (z > max_zigzag) break;  // (the checked path refuses it)
        M[i] = unzigzag64(z);
        w = at_v << len;  // len <= 56
        used += total;
      }
      if (used > 0) {
        r.pos += static_cast<std::uint64_t>(used);
        continue;
      }
    }
    // Checked path: near the end of the section, and for long or invalid codes.
    std::uint64_t nz = 0, rest = 0;
    ReadStatus st = bits_zeros_then_one(r, static_cast<std::uint64_t>(max_zeros), &nz);
    if (st != kReadOk) return st;
    const int len = static_cast<int>(nz) + k + 1;
    // The leading one was consumed; read the remaining len - 1 bits.
    if ((st = bits_get_long(r, len - 1, &rest)) != kReadOk) return st;
    const std::uint64_t v = (std::uint64_t{1} << (len - 1)) | rest;
    const std::uint64_t z = v - offset;
    if (v < offset || z > max_zigzag) return kReadCoordinateRange;
    M[i] = unzigzag64(z);
    ++i;
  }
  return kReadOk;
}

}  // namespace golomb_read_detail

// Reads N trial indices H[0..N) of Golomb parameter g (none coded where
// g = 0: every H is 1).
CEPAM_HD inline ReadStatus golomb_read_h(BitCursor& cursor, std::uint32_t g, std::size_t N,
                                         std::uint32_t* H) {
  BitCursor r = cursor;
  const ReadStatus st = golomb_read_detail::read_h(r, g, N, H);
  cursor = r;
  return st;
}

// Reads `count` coordinates M[0..count) of exp-Golomb order k.
CEPAM_HD inline ReadStatus golomb_read_m(BitCursor& cursor, int k, std::size_t count,
                                         std::int64_t* M) {
  BitCursor r = cursor;
  const ReadStatus st = golomb_read_detail::read_m(r, k, count, M);
  cursor = r;
  return st;
}

// Whether a section (of `bytes` bytes at sec, read by r) was consumed to
// its `bits` bits exactly with zero padding after them: kReadOk, else
// `trailing` or `padding`.
CEPAM_HD inline ReadStatus golomb_section_end(const BitCursor& r, std::uint64_t bits,
                                              const std::uint8_t* sec, std::uint64_t bytes,
                                              ReadStatus trailing, ReadStatus padding) {
  if (r.pos != bits) return trailing;
  const int pad = static_cast<int>(bytes * 8 - bits);
  if (pad > 0 && (sec[bytes - 1] & ((1u << pad) - 1)) != 0) return padding;
  return kReadOk;
}

}  // namespace cepam
