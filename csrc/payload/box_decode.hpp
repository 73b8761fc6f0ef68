// An ANS body of the box model (every segment's model byte 0, or none on
// Z^n) decoded a segment at a time, written once for a GPU's kernel
// (cuda/ans_gpu.cu, a block of threads a segment) and its host twin
// (payload/ans_streams.hpp's decode_box_ans_body_by_segments): the rANS
// reader (coding/rans_core.hpp), the symbols' decoders
// (coding/symbol_core.hpp) and the side information and reconstruction of
// one sub-vector (lrsuq/subvector.hpp), walked as the CPU's decoder walks
// a segment (payload/body.cpp's decode_ans_blocks): block by block, the
// block's trial indices, then piece by piece the pieces' trial indices
// checked, their side information and coordinates, each sub-vector's in
// coding order (k = n-1 .. 0) in the table g = beta G_kk, o = box_offset.
// So the values are the CPU's, and a stream the CPU refuses is refused
// with the CPU's error, the first the stream meets
// (tests/core/test_box_decode.py compares the two on valid and corrupted
// bodies).  Device code needs --fmad=false (CMakeLists.txt), as the
// tables' bits depend on it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/rans_core.hpp"
#include "coding/symbol_core.hpp"
#include "common/host_device.hpp"
#include "lrsuq/subvector.hpp"

namespace cepam {

// Where a segment lies: its rANS stream (body + offset, size bytes), its
// sub-vectors [first, last) and whether padding may end it (the last
// segment of a body no longer than the bomb rule asks: payload/body.hpp).
struct BoxSegment {
  std::uint64_t offset, size, first, last;
  int may_pad;
};

// A segment's outcome: kReadOk, or the first error the stream meets
// (kReadBadTrial: at sub-vector `at`, whose trial index is h;
// kReadNonFinite: sub-vector `at` decodes to a value its type cannot hold).
struct BoxSegmentOutcome {
  int status;
  std::uint64_t at;
  std::uint32_t h;
};

// The steps of a segment's decoding, which box_decode_segment runs in turn
// and a GPU's kernel shares among a block's threads (the side information
// and the reconstruction in parallel, the stream's steps on one thread).

// The trial indices H[0..count) of a block.
CEPAM_HD inline int box_read_trials(const SymbolModel& z, RansReader& r, std::size_t count,
                                  std::uint32_t* H) {
  for (std::size_t i = 0; i < count; ++i) {
    const int st = geometric_decode(z.geometric, r, &H[i]);
    if (st != kReadOk) return st;
  }
  return kReadOk;
}

// The first of a piece's trial indices H[0..count) (sub-vectors j0 ..)
// that the encoder cannot send, else kReadOk.
CEPAM_HD inline BoxSegmentOutcome box_check_trials(const subvector::Config& c,
                                               const std::uint32_t* H, std::size_t count,
                                               std::uint64_t j0) {
  for (std::size_t i = 0; i < count; ++i)
    if (!subvector::trial_ok(c, H[i])) return BoxSegmentOutcome{kReadBadTrial, j0 + i, H[i]};
  return BoxSegmentOutcome{kReadOk, 0, 0};
}

// The coordinates M[0..count n) of a piece's sub-vectors, given their side
// information beta[count] and V[count n]: each sub-vector's in coding
// order, in the table g = beta G_kk, o = box_offset of the coordinates
// decoded before it.
CEPAM_HD inline int box_read_points(const SymbolModel& z, RansReader& r, std::size_t count,
                                    const double* beta, const double* V, std::int64_t* M) {
  const std::size_t n = static_cast<std::size_t>(z.basis.n);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t* m = M + i * n;
    for (std::size_t c = 0; c < n; ++c) {
      const std::size_t k = n - 1 - c;
      const double o = box_offset(z.basis, static_cast<int>(c), beta[i], V[i * n + k],
                                  [&](int d) { return static_cast<double>(m[k + static_cast<std::size_t>(d)]); });
      const CellLayout l = cell_layout(z.cdf.a, beta[i] * z.basis.diag[c], o);
      const int st = cell_decode(z.cdf, z.quantile, l, r, &m[k]);
      if (st != kReadOk) return st;
    }
  }
  return kReadOk;
}

// The stream's end (after the last symbol): its padding must be allowed.
CEPAM_HD inline int box_read_end(RansReader& r, const BoxSegment& seg) {
  std::size_t padding = 0;
  const int st = rans_finish(r, &padding);
  return st == kReadOk && padding != 0 && seg.may_pad == 0 ? kReadPaddingBeyond : st;
}

// Room a segment's decoding needs: the trial indices of a block, and the
// side information and coordinates of a piece.
struct BoxDecodeScratch {
  std::uint32_t* H;  // z.block
  double* beta;      // z.piece
  double* V;         // z.piece n
  std::int64_t* M;   // z.piece n
};

// Decodes segment `seg` of a body (key: the LRSUQ stream's ChaCha20 key
// words; m: the update's coordinates) into y (its sub-vectors'
// coordinates below m).  As the CPU's decoder, it checks a piece's values
// once they are written: the first sub-vector of the piece with a value
// that is not finite is an error (kReadNonFinite).  On an error, y holds
// some of the segment's values.
template <class T>
CEPAM_HD inline BoxSegmentOutcome box_decode_segment(const SymbolModel& z,
                                                 const subvector::Config& c,
                                                 const std::uint32_t* key,
                                                 const std::uint8_t* body, const BoxSegment& seg,
                                                 std::uint64_t m, const BoxDecodeScratch& b,
                                                 T* y) {
  RansReader r;
  BoxSegmentOutcome out{rans_open(r, body + seg.offset, static_cast<std::size_t>(seg.size)), 0, 0};
  if (out.status != kReadOk) return out;
  const std::size_t n = static_cast<std::size_t>(z.basis.n);
  for (std::uint64_t b0 = seg.first; b0 < seg.last; b0 += z.block) {
    const std::size_t count =
        seg.last - b0 < z.block ? static_cast<std::size_t>(seg.last - b0) : z.block;
    if ((out.status = box_read_trials(z, r, count, b.H)) != kReadOk) return out;
    for (std::size_t k0 = 0; k0 < count; k0 += z.piece) {
      const std::size_t e = count - k0 < z.piece ? count - k0 : z.piece;
      out = box_check_trials(c, b.H + k0, e, b0 + k0);
      if (out.status != kReadOk) return out;
      for (std::size_t i = 0; i < e; ++i)
        b.beta[i] = subvector::side_info_one(c, key, b.H[k0 + i], b0 + k0 + i, b.V + i * n);
      if ((out.status = box_read_points(z, r, e, b.beta, b.V, b.M)) != kReadOk) return out;
      std::size_t first_nonfinite = e;
      for (std::size_t i = 0; i < e; ++i) {
        const bool finite =
            subvector::reconstruct_one(c, b.beta[i], b.V + i * n, b.M + i * n, m, b0 + k0 + i, y);
        if (!finite && first_nonfinite == e) first_nonfinite = i;
      }
      if (first_nonfinite != e) return BoxSegmentOutcome{kReadNonFinite, b0 + k0 + first_nonfinite, 0};
    }
  }
  out.status = box_read_end(r, seg);
  return out;
}

}  // namespace cepam
