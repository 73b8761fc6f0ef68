// An ANS body decoded a segment at a time, written once for a GPU's kernel
// (cuda/ans_gpu.cu, a block of threads a segment) and its host twin
// (payload/ans_streams.hpp's decode_ans_body_by_segments): the rANS reader
// (coding/rans_core.hpp), the symbols' decoders (coding/symbol_core.hpp),
// the point model's tables (coding/point_table.hpp) and the side
// information and reconstruction of one sub-vector (lrsuq/subvector.hpp),
// walked as the CPU's decoder walks a segment (payload/body.cpp's
// decode_ans_blocks): block by block, the block's trial indices, then
// piece by piece the pieces' trial indices checked, their side information
// and coordinates: in a segment of the point model (model byte 1) a
// sub-vector with a table takes its candidate, or the escape and its box
// symbols; every other sub-vector its box symbols, each coordinate in
// coding order (k = n-1 .. 0) in the table g = beta G_kk, o = box_offset.
// So the values are the CPU's, and a stream the CPU refuses is refused
// with the CPU's error, the first the stream meets
// (tests/core/test_segment_decode.py compares the two on valid and
// corrupted bodies).  Device code needs --fmad=false (CMakeLists.txt), as
// the tables' bits depend on it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/rans_core.hpp"
#include "coding/symbol_core.hpp"
#include "common/host_device.hpp"
#include "lrsuq/subvector.hpp"
#include "payload/segment_outcome.hpp"

namespace cepam {

// Where a segment lies: its rANS stream (body + offset, size bytes), its
// sub-vectors [first, last), whether padding may end it (the last segment
// of a body no longer than the bomb rule asks: payload/body.hpp) and
// whether the point model codes it (its model byte).
struct DecodeSegment {
  std::uint64_t offset, size, first, last;
  int may_pad;
  int points;
};

// The steps of a segment's decoding, which decode_segment runs in turn
// and a GPU's kernel shares among a block's threads (the side information
// and the reconstruction in parallel, the stream's steps on one thread).

// The trial indices H[0..count) of a block.
CEPAM_HD inline int read_trials(const SymbolModel& z, RansReader& r, std::size_t count,
                                std::uint32_t* H) {
  for (std::size_t i = 0; i < count; ++i) {
    const int st = geometric_decode(z.geometric, r, &H[i]);
    if (st != kReadOk) return st;
  }
  return kReadOk;
}

// The first of a piece's trial indices H[0..count) (sub-vectors j0 ..)
// that the encoder cannot send, else kReadOk.
CEPAM_HD inline SegmentOutcome check_trials(const subvector::Config& c,
                                            const std::uint32_t* H, std::size_t count,
                                            std::uint64_t j0) {
  for (std::size_t i = 0; i < count; ++i)
    if (!subvector::trial_ok(c, H[i])) return SegmentOutcome{kReadBadTrial, j0 + i, H[i]};
  return SegmentOutcome{kReadOk, 0, 0};
}

// The coordinates m[n] of a sub-vector with scale beta and dither v[n] by
// the box model: in coding order, each in its table (box_layout of the
// coordinates decoded before it).
CEPAM_HD inline int read_box_subvector(const SymbolModel& z, RansReader& r, double beta,
                                       const double* v, std::int64_t* m) {
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  for (std::size_t c = 0; c < n; ++c) {
    const CellLayout l = box_layout(z, c, beta, v, m);
    const int st = cell_decode(z.cdf, z.quantile, l, r, &m[n - 1 - c]);
    if (st != kReadOk) return st;
  }
  return kReadOk;
}

// The coordinates M[0..count n) of a piece's sub-vectors, given their side
// information beta[count] and V[count n].  In a segment of the point model
// (T given: room for a table), a sub-vector with a table (point_prepare)
// takes its candidate's symbol, or the escape and then its box symbols (an
// escaped point that is a candidate is refused: kReadNonCanonicalPoint, as
// the CPU's AnsSegmentDecoder); every other sub-vector its box symbols.
CEPAM_HD inline int read_points(const SymbolModel& z, RansReader& r, std::size_t count,
                                const double* beta, const double* V, PointTable* T,
                                std::int64_t* M) {
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t* m = M + i * n;
    const double* v = V + i * n;
    const bool tabled = T != nullptr && point_prepare(*z.point_basis, z.points, beta[i], v, *T,
                                                      PointFillCosets{}, PointBallProbabilities{});
    if (tabled && rans_peek(r) < kPointSlots) {
      const std::size_t k = point_index(*T, rans_peek(r));
      const int st = rans_advance(r, T->cum[k], T->cum[k + 1] - T->cum[k]);
      if (st != kReadOk) return st;
      point_candidate(*z.point_basis, *T, k, m);
      continue;
    }
    if (tabled) {  // the escape, then the box model's symbols
      const int st = rans_advance(r, kPointSlots, kPointEscapeFreq);
      if (st != kReadOk) return st;
    }
    const int st = read_box_subvector(z, r, beta[i], v, m);
    if (st != kReadOk) return st;
    if (tabled && point_listed(*z.point_basis, *T, m)) return kReadNonCanonicalPoint;
  }
  return kReadOk;
}

// The stream's end (after the last symbol): its padding must be allowed.
CEPAM_HD inline int read_end(RansReader& r, const DecodeSegment& seg) {
  std::size_t padding = 0;
  const int st = rans_finish(r, &padding);
  return st == kReadOk && padding != 0 && seg.may_pad == 0 ? kReadPaddingBeyond : st;
}

// Room a segment's decoding needs: the trial indices of a block, the side
// information and coordinates of a piece, and a point table.
struct DecodeScratch {
  std::uint32_t* H;  // z.block
  double* beta;      // z.piece
  double* V;         // z.piece n
  std::int64_t* M;   // z.piece n
  PointTable* table; // one, for a segment of the point model (else not read)
};

// Decodes segment `seg` of a body (key: the LRSUQ stream's ChaCha20 key
// words; m: the update's coordinates) into y (its sub-vectors'
// coordinates below m).  As the CPU's decoder, it checks a piece's values
// once they are written: the first sub-vector of the piece with a value
// that is not finite is an error (kReadNonFinite).  On an error, y holds
// some of the segment's values.
template <class T>
CEPAM_HD inline SegmentOutcome decode_segment(const SymbolModel& z, const subvector::Config& c,
                                              const std::uint32_t* key, const std::uint8_t* body,
                                              const DecodeSegment& seg, std::uint64_t m,
                                              const DecodeScratch& b, T* y) {
  RansReader r;
  SegmentOutcome out{rans_open(r, body + seg.offset, static_cast<std::size_t>(seg.size)), 0, 0};
  if (out.status != kReadOk) return out;
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  for (std::uint64_t b0 = seg.first; b0 < seg.last; b0 += z.block) {
    const std::size_t count =
        seg.last - b0 < z.block ? static_cast<std::size_t>(seg.last - b0) : z.block;
    if ((out.status = read_trials(z, r, count, b.H)) != kReadOk) return out;
    for (std::size_t k0 = 0; k0 < count; k0 += z.piece) {
      const std::size_t e = count - k0 < z.piece ? count - k0 : z.piece;
      out = check_trials(c, b.H + k0, e, b0 + k0);
      if (out.status != kReadOk) return out;
      for (std::size_t i = 0; i < e; ++i)
        b.beta[i] = subvector::side_info_one(c, key, b.H[k0 + i], b0 + k0 + i, b.V + i * n);
      PointTable* table = seg.points != 0 ? b.table : nullptr;
      if ((out.status = read_points(z, r, e, b.beta, b.V, table, b.M)) != kReadOk) return out;
      std::size_t first_nonfinite = e;
      for (std::size_t i = 0; i < e; ++i) {
        const bool finite =
            subvector::reconstruct_one(c, b.beta[i], b.V + i * n, b.M + i * n, m, b0 + k0 + i, y);
        if (!finite && first_nonfinite == e) first_nonfinite = i;
      }
      if (first_nonfinite != e) return SegmentOutcome{kReadNonFinite, b0 + k0 + first_nonfinite, 0};
    }
  }
  out.status = read_end(r, seg);
  return out;
}

}  // namespace cepam
