// A Golomb body decoded a segment at a time, written once for a GPU's
// kernel (cuda/golomb_gpu.cu, a block of threads a segment) and its host
// twin (payload/golomb_body.hpp's decode_golomb_body_by_segments), walked
// as the CPU's decoder walks a segment (payload/body.cpp's
// decode_golomb_pieces, then lrsuq_decode_range): piece by piece
// (golomb_piece sub-vectors), the piece's trial indices, then its
// coordinates (coding/golomb_read.hpp), then its values (the side
// information and the reconstruction of lrsuq/subvector.hpp), whose first
// error is the one in the first chunk of subvector::kChunk sub-vectors (from
// the piece's start) with a bad trial index or a value that is not finite,
// the trial index first, as the CPU checks a chunk's trial indices before
// it reconstructs the chunk; at the segment's end its H section's end,
// then its M section's.  So the values are the CPU's, and a body the CPU
// refuses is refused with the CPU's error, the first the segment meets
// (tests/core/test_golomb_segment.py compares the two on valid and
// corrupted bodies).
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/golomb_read.hpp"
#include "coding/read_status.hpp"
#include "common/host_device.hpp"
#include "lrsuq/subvector.hpp"
#include "payload/segment_outcome.hpp"

namespace cepam {

// Sub-vectors a piece of a Golomb segment, the unit in which the encoder
// runs LRSUQ and codes H, and the decoder reads H and M and decodes their
// values (not part of the format, but the order of a decoder's errors):
// 2^14 coordinates for n <= 3, at most 192 KiB of symbols a thread; 2^12
// for n >= 4, whose side information takes more a coordinate
// (docs/guide/performance.md, "Sizes chosen by measurement").
CEPAM_HD inline std::size_t golomb_piece(std::size_t n) {
  return (std::size_t{1} << (n >= 4 ? 12 : 14)) / n;
}

// Where a segment lies: its sections (body + offset: the H section's
// bits, then the M section's, each padded to a byte), its sub-vectors
// [first, last), its exp-Golomb order, and whether its sections can hold
// its sub-vectors (check_body; if not, its outcome is
// kReadSectionsTooShort, as the CPU's reader refuses it when opened).
struct GolombSegmentSpan {
  std::uint64_t offset, h_bits, m_bits;
  std::uint64_t first, last;
  int k;
  int fits;
};

// A segment's two sections being read.
struct GolombSegmentReader {
  BitCursor h, m;
};

// The segment's H section and M section.
CEPAM_HD inline const std::uint8_t* golomb_h_section(const std::uint8_t* body,
                                                     const GolombSegmentSpan& s) {
  return body + s.offset;
}
CEPAM_HD inline const std::uint8_t* golomb_m_section(const std::uint8_t* body,
                                                     const GolombSegmentSpan& s) {
  return body + s.offset + (s.h_bits + 7) / 8;
}

CEPAM_HD inline GolombSegmentReader golomb_segment_open(const std::uint8_t* body,
                                                        const GolombSegmentSpan& s) {
  return {{golomb_h_section(body, s), s.h_bits, 0}, {golomb_m_section(body, s), s.m_bits, 0}};
}

// A piece's trial indices H[0..count) (Golomb parameter g), then its
// coordinates M[0..count n).
CEPAM_HD inline ReadStatus golomb_read_piece(GolombSegmentReader& r, std::uint32_t g, int k,
                                             std::size_t count, std::size_t n,
                                             std::uint32_t* H, std::int64_t* M) {
  const ReadStatus st = golomb_read_h(r.h, g, count, H);
  return st != kReadOk ? st : golomb_read_m(r.m, k, count * n, M);
}

// Sub-vector i of a piece whose first sub-vector is j0: its values into y
// (those below m) where its trial index is one the encoder can send.
// Returns 0, or 1 for a bad trial index (no values), 2 for a value that is
// not finite.
template <class T>
CEPAM_HD inline int golomb_piece_value(const subvector::Config& c, const std::uint32_t* key,
                                       const std::uint32_t* H, const std::int64_t* M,
                                       std::uint64_t j0, std::size_t i, std::uint64_t m, T* y) {
  if (!subvector::trial_ok(c, H[i])) return 1;
  double v[subvector::kMaxDim];
  const double beta = subvector::side_info_one(c, key, H[i], j0 + i, v);
  return subvector::reconstruct_one(c, beta, v, M + i * static_cast<std::size_t>(c.n), m, j0 + i,
                                    y)
             ? 0
             : 2;
}

// A piece's outcome from its first sub-vector with a bad trial index (t)
// and with a value that is not finite (f), count where none.
CEPAM_HD inline SegmentOutcome golomb_piece_outcome(const std::uint32_t* H, std::size_t count,
                                                    std::uint64_t j0, std::size_t t,
                                                    std::size_t f) {
  if (t < count && (f >= count || t / subvector::kChunk <= f / subvector::kChunk))
    return SegmentOutcome{kReadBadTrial, j0 + t, H[t]};
  if (f < count) return SegmentOutcome{kReadNonFinite, j0 + f, 0};
  return SegmentOutcome{kReadOk, 0, 0};
}

// The segment's sections' ends: each consumed exactly, its padding zero.
CEPAM_HD inline ReadStatus golomb_segment_end(const GolombSegmentReader& r,
                                              const std::uint8_t* body,
                                              const GolombSegmentSpan& s) {
  const ReadStatus st = golomb_section_end(r.h, s.h_bits, golomb_h_section(body, s),
                                           (s.h_bits + 7) / 8, kReadHTrailing, kReadHPadding);
  return st != kReadOk ? st
                       : golomb_section_end(r.m, s.m_bits, golomb_m_section(body, s),
                                            (s.m_bits + 7) / 8, kReadMTrailing, kReadMPadding);
}

// Decodes segment s of a body (Golomb parameter g; key: the LRSUQ
// stream's ChaCha20 key words; m: the update's coordinates) into y on one
// thread, a piece's symbols in H[golomb_piece(n)] and M[golomb_piece(n) n]:
// the steps a GPU's block shares among its threads.  On an error, y holds
// some of the segment's values.
template <class T>
CEPAM_HD inline SegmentOutcome decode_golomb_segment(const subvector::Config& c,
                                                     const std::uint32_t* key,
                                                     const std::uint8_t* body,
                                                     const GolombSegmentSpan& s, std::uint32_t g,
                                                     std::uint64_t m, std::uint32_t* H,
                                                     std::int64_t* M, T* y) {
  if (s.fits == 0) return SegmentOutcome{kReadSectionsTooShort, 0, 0};
  const std::size_t n = static_cast<std::size_t>(c.n);
  const std::size_t piece = golomb_piece(n);
  GolombSegmentReader r = golomb_segment_open(body, s);
  for (std::uint64_t j0 = s.first; j0 < s.last; j0 += piece) {
    const std::size_t count =
        s.last - j0 < piece ? static_cast<std::size_t>(s.last - j0) : piece;
    const ReadStatus st = golomb_read_piece(r, g, s.k, count, n, H, M);
    if (st != kReadOk) return SegmentOutcome{st, 0, 0};
    std::size_t t = count, f = count;
    for (std::size_t i = 0; i < count; ++i) {
      const int v = golomb_piece_value(c, key, H, M, j0, i, m, y);
      if (v == 1 && t == count) t = i;
      if (v == 2 && f == count) f = i;
    }
    const SegmentOutcome out = golomb_piece_outcome(H, count, j0, t, f);
    if (out.status != kReadOk) return out;
  }
  return SegmentOutcome{golomb_segment_end(r, body, s), 0, 0};
}

}  // namespace cepam
