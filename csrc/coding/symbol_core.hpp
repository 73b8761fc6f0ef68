// The ANS coder's symbols (coding/conditional_coder.hpp) written once for
// the CPU and a GPU (CEPAM_HD, common/host_device.hpp): plain inline
// functions on caller-provided buffers, no allocation, no exception, no
// virtual call.  The source model's CDF (SourceModel::cdf), a coordinate's
// table (CellCoder::layout), its symbols (plain, coarse or escaped:
// CellCoder::encode) and the trial index's (GeometricCoder::encode) are
// these functions, so the CPU's bytes are this code's bytes; the box
// model's offsets (box_offset) are BoxBasis's; unit_symbols gives a
// unit of a body's box or point stream the way AnsSegmentEncoder::
// encode_block does (the point model's tables by coding/point_table.hpp,
// PointCoder's own code), for a GPU's kernel (cuda/ans_gpu.cu) and its
// host twin (payload/ans_streams.hpp), which the tests compare with the
// CPU's payloads bit for bit (tests/core/test_symbol_core.py).
//
// Device code needs --fmad=false (CMakeLists.txt): a product and a sum
// contracted into one rounding would change the tables' bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/bitstream.hpp"
#include "coding/point_core.hpp"
#include "coding/point_table.hpp"
#include "coding/rans_core.hpp"
#include "common/format_limits.hpp"
#include "common/host_device.hpp"

namespace cepam {

// The source model's grid tables (coding/source_model.hpp): A, kCells /
// (2A), knot[0..kCells] and slope[0..kCells) in units of 2^-22.
struct CdfView {
  double a;
  double inv_width;
  const double* knot;
  const double* slope;
};

inline constexpr int kCdfCells = 1024;          // SourceModel::kCells
inline constexpr double kCdfTableScale = 4194304.0;  // 2^22, SourceModel::kTableScale
inline constexpr int kCdfKnotBits = 12;  // SourceModel::kKnotBits: the quantile table's levels

// P(X <= x) under the model (SourceModel::cdf documents it).
CEPAM_HD inline double model_cdf(const CdfView& m, double x) {
  if (!(x > -m.a)) return 0.0;
  if (!(x < m.a)) return 1.0;
  const double u = (x + m.a) * m.inv_width;
  if (!(u < 2.0 * kCdfCells)) return 1.0;  // NaN (u < kCells + 1 otherwise)
  int i = static_cast<int>(u);
  if (i > kCdfCells - 1) i = kCdfCells - 1;
  return (m.knot[i] + (u - static_cast<double>(i)) * m.slope[i]) * (1.0 / kCdfTableScale);
}

// floor(v) clamped to [-kMaxAbsM, kMaxAbsM] (NaN to -kMaxAbsM), as an
// integer.  Inside the range, |v| < 2^53 converts exactly, and floor is the
// truncation less one for negative non-integers (no call to std::floor,
// which x86-64 without SSE4.1 computes in a dozen instructions).  A v above
// -2^53 has a floor above -2^53 (the doubles there are integers), so the
// clamp is that of std::floor(v).
CEPAM_HD inline std::int64_t floor_cell(double v) {
  const double limit = static_cast<double>(kMaxAbsM);
  if (!(v > -limit)) return -kMaxAbsM;
  if (!(v < limit)) return kMaxAbsM;
  const std::int64_t t = static_cast<std::int64_t>(v);
  return t - (static_cast<double>(t) > v ? 1 : 0);
}

// A coordinate's cumulative table (CellCoder documents it).
struct CellLayout {
  std::int64_t lo, hi;  // fine cells [lo, hi]
  std::int64_t count;   // coarse symbols Q
  int shift;            // coarse symbol = 2^shift fine cells
  std::uint32_t range;  // R = 2^kProbBits - Q - 1
  double g, o;
  // The decoder's guess (CellCoder::guess): the model's quantile u (in grid
  // cells) lies guess_a + u guess_b cells above cell lo.
  double guess_a, guess_b;
};

inline constexpr std::int64_t kCellMaxSymbols = 1 << 12;  // CellCoder::kMaxSymbols
inline constexpr std::int64_t kCellMargin = 2;
inline constexpr std::uint32_t kCellEscapeFreq = 1;  // the escape: the last slot

// The table of a coordinate in cells of width g at offset o, for a model
// on [-a, a].
CEPAM_HD inline CellLayout cell_layout(double a, double g, double o) {
  CellLayout l;
  l.g = g;
  l.o = o;
  const double z_lo = (-a - o) / g;  // -A and A, in cells
  const double z_hi = (a - o) / g;
  l.lo = floor_cell(z_lo + 0.5) - kCellMargin;
  l.hi = floor_cell(z_hi + 0.5) + kCellMargin;
  if (l.lo < -kMaxAbsM) l.lo = -kMaxAbsM;
  if (l.hi > kMaxAbsM) l.hi = kMaxAbsM;
  if (l.hi < l.lo) l.hi = l.lo;
  const std::uint64_t span = static_cast<std::uint64_t>(l.hi - l.lo);  // cells - 1
  // The smallest shift with (span >> shift) < kMaxSymbols = 2^12.
  static_assert(kCellMaxSymbols == 1 << 12, "shift rule");
  const int width = span == 0 ? 0 : 64 - count_leading_zeros(span);
  l.shift = width > 12 ? width - 12 : 0;
  l.count = static_cast<std::int64_t>(span >> l.shift) + 1;
  l.range = kProbScale - static_cast<std::uint32_t>(l.count) - kCellEscapeFreq;
  l.guess_a = z_lo + 0.5 - static_cast<double>(l.lo);
  l.guess_b = (z_hi - z_lo) * (1.0 / kCdfCells);
  return l;
}

// cum(q) for 0 < q < count, given the cell's lower edge in cells,
// double(lo + (q << shift)) - 0.5: floor(F(edge) R) + q.
CEPAM_HD inline std::uint32_t cell_cum_at(const CdfView& m, const CellLayout& l,
                                          double edge_cells, std::int64_t q) {
  const double edge = l.g * edge_cells + l.o;
  // floor(F R) + q; F R lies in [0, 2^kProbBits], where truncation is floor.
  const double f = model_cdf(m, edge) * static_cast<double>(l.range);
  return static_cast<std::uint32_t>(f) + static_cast<std::uint32_t>(q);
}

CEPAM_HD inline std::uint32_t cell_cum(const CdfView& m, const CellLayout& l, std::int64_t q) {
  if (q <= 0) return 0;
  if (q >= l.count) return l.range + static_cast<std::uint32_t>(l.count);
  const std::int64_t cell = l.lo + (q << l.shift);
  return cell_cum_at(m, l, static_cast<double>(cell) - 0.5, q);
}

// A uniform symbol of `bits` (1..16) raw bits, rescaled to kProbBits
// (AnsEncoder::put_raw).
CEPAM_HD inline AnsSymbol raw_symbol(std::uint32_t value, int bits) {
  const int shift = kProbBits - bits;
  return AnsSymbol{value << shift, 1u << shift};
}

// The symbols of `bits` (1..64) raw bits, 16 at a time from the top
// (AnsEncoder::put_raw_long), at out; returns their number (at most 4).
CEPAM_HD inline int raw_long_symbols(std::uint64_t value, int bits, AnsSymbol* out) {
  int k = 0;
  while (bits > 16) {
    bits -= 16;
    out[k++] = raw_symbol(static_cast<std::uint32_t>((value >> bits) & 0xffffu), 16);
  }
  out[k++] = raw_symbol(static_cast<std::uint32_t>(value & ((std::uint64_t{1} << bits) - 1)), bits);
  return k;
}

// An escaped value (no escape symbol): 6 raw bits of its length L, then L
// raw bits of zigzag(j); returns the number of symbols (at most 5).
CEPAM_HD inline int escaped_value_symbols(std::int64_t j, AnsSymbol* out) {
  const std::uint64_t z = zigzag64(j);
  int len = 0;
  while (len < 64 && (z >> len) != 0) ++len;
  out[0] = raw_symbol(static_cast<std::uint32_t>(len), 6);
  return len > 0 ? 1 + raw_long_symbols(z, len, out + 1) : 1;
}

// The most symbols one coordinate takes (the escape, 6 bits, 4 raw words).
inline constexpr int kMaxCellSymbols = 6;

// Coordinate j in table l: its symbol, else (a coarse table) its coarse
// symbol and offset, else (outside the table) the escape and the value
// raw.  Writes at out (room for kMaxCellSymbols) and returns the number of
// symbols (CellCoder::encode).
CEPAM_HD inline int cell_symbols(const CdfView& m, std::int64_t j, const CellLayout& l,
                                 AnsSymbol* out) {
  if (j < l.lo || j > l.hi) {
    out[0] = AnsSymbol{kProbScale - kCellEscapeFreq, kCellEscapeFreq};
    return 1 + escaped_value_symbols(j, out + 1);
  }
  const std::uint64_t d = static_cast<std::uint64_t>(j - l.lo);
  const std::int64_t q = static_cast<std::int64_t>(d >> l.shift);
  const std::uint32_t start = cell_cum(m, l, q);
  out[0] = AnsSymbol{start, cell_cum(m, l, q + 1) - start};
  if (l.shift == 0) return 1;
  return 1 + raw_long_symbols(d & ((std::uint64_t{1} << l.shift) - 1), l.shift, out + 1);
}

// The trial index's table (GeometricCoder): cum[h - 1] .. cum[h] is h's
// interval for h = 1 .. kGeometricTable, cum[kGeometricTable] the
// escape's start.
inline constexpr int kGeometricTable = 64;

// The symbols of trial index h (nothing where the acceptance probability
// is 1: cum = nullptr): its interval, or the escape and h - 1 in 16 raw
// bits (h <= kTrialCap = 2^16).  Returns their number (at most 2).
CEPAM_HD inline int geometric_symbols(const std::uint32_t* cum, std::uint32_t h,
                                      AnsSymbol* out) {
  if (cum == nullptr) return 0;
  if (h >= 1 && h <= static_cast<std::uint32_t>(kGeometricTable)) {
    out[0] = AnsSymbol{cum[h - 1], cum[h] - cum[h - 1]};
    return 1;
  }
  out[0] = AnsSymbol{cum[kGeometricTable], 1};  // the escape
  out[1] = raw_symbol(h - 1, 16);
  return 2;
}

// The box model's basis in coding order (coding/conditional_coder.hpp's
// BoxBasis holds one): coordinate k of a sub-vector is coded at position c
// = n - 1 - k in cells of width beta G_kk (diag[c]) at offset
// o = beta (V_k + sum_{i>k} m_i G_ik), the sum over position c's terms
// t in [first[c], first[c + 1]): the nonzero G_ik (coef[t]), in order of
// i, at distance dist[t] = i - k.  On Z^n there are none.
struct BoxTerms {
  static constexpr int kMaxN = 8;
  int n;
  double diag[kMaxN];
  int first[kMaxN + 1];
  int dist[kMaxN * (kMaxN - 1) / 2];
  double coef[kMaxN * (kMaxN - 1) / 2];
};

// The terms of a lower-triangular basis b[n n] (row i, column k; n in
// 1..8).
CEPAM_HD inline BoxTerms box_terms(int n, const double* b) {
  BoxTerms g{};
  g.n = n;
  int t = 0;
  for (int c = 0; c < n; ++c) {
    const int k = n - 1 - c;
    g.diag[c] = b[k * n + k];
    g.first[c] = t;
    for (int i = k + 1; i < n; ++i) {
      const double gik = b[i * n + k];
      if (gik == 0.0) continue;
      g.dist[t] = i - k;
      g.coef[t] = gik;
      ++t;
    }
  }
  g.first[n] = t;
  return g;
}

// The offset o at coding position c of a sub-vector with scale beta and
// dither coordinate v = V_k, where m(d) is m_{k+d} as a double (exact:
// |m| <= 2^53), the coordinate d positions before in coding order.  Only
// the nonzero G_ik enter the sum: a term m_i 0 = +-0 leaves a double
// unchanged except that -0 + +0 = +0, and the sign of a zero o changes
// neither the table (cell_layout computes -A - o and A - o) nor a cell
// edge (g (c - 1/2) + o, where cdf(+0) = cdf(-0)).
template <class Mf>
CEPAM_HD inline double box_offset(const BoxTerms& g, int c, double beta, double v, Mf&& m) {
  double shift = v;
  for (int t = g.first[c]; t < g.first[c + 1]; ++t) shift += m(g.dist[t]) * g.coef[t];
  return beta * shift;
}

// What a segment's symbols need besides its sub-vectors: the model (and,
// for the decoder's guesses, its quantile table: SourceModel::
// quantile_cells), the trial index's table (nullptr: H not coded), the
// basis in coding order, the point model's bounds and basis (points.usable
// = 0 where the lattice has no point model: Z^n), the block size
// (kAnsBlock) and, for the decoder, the sub-vectors a piece
// (payload/ans_body.hpp).
//
// A view, by pointers, so that a GPU's kernels take it by value without
// copying the bases to each thread's local memory (payload/ans_streams.hpp's
// SymbolTables owns the host's; cuda/ans_gpu.cu copies them to the device).
struct SymbolModel {
  CdfView cdf;
  const double* quantile;
  const std::uint32_t* geometric;
  const BoxTerms* basis;
  PointBounds points;
  const PointBasis* point_basis;
  std::size_t block;
  std::size_t piece;
};

// Where a run of symbols goes: each value's symbols are put in a local
// array first, then (out given) copied to out + k by plain stores to the
// caller's buffer, never through a pointer that may be either (on a GPU:
// local or global memory); out = nullptr counts them only.  flag is set
// by the box model's symbols when a sub-vector has a point frame, by the
// point model's when a sub-vector has a table.
struct SymbolSink {
  AnsSymbol* out;
  std::size_t k;
  bool flag;
  CEPAM_HD void put(const AnsSymbol* tmp, int count) {
    if (out != nullptr)
      for (int i = 0; i < count; ++i) out[k + static_cast<std::size_t>(i)] = tmp[i];
    k += static_cast<std::size_t>(count);
  }
};

// The symbols of the trial indices of sub-vectors [j0, j1) (H indexed by
// sub-vector), put to `sink`.
CEPAM_HD inline void h_symbols(const SymbolModel& z, std::size_t j0, std::size_t j1,
                               const std::uint32_t* H, SymbolSink& sink) {
  AnsSymbol tmp[kMaxCellSymbols];
  for (std::size_t j = j0; j < j1; ++j) sink.put(tmp, geometric_symbols(z.geometric, H[j], tmp));
}

// The table of the coordinate at coding position c (k = n-1-c) of a
// sub-vector with scale beta, dither v[n] and coordinates m[n] (those
// coded before it, m_{k+1} .. m_{n-1}, read): g = beta G_kk, o =
// box_offset.
CEPAM_HD inline CellLayout box_layout(const SymbolModel& z, std::size_t c, double beta,
                                      const double* v, const std::int64_t* m) {
  const std::size_t k = static_cast<std::size_t>(z.basis->n) - 1 - c;
  const auto before = [&](int d) {
    return static_cast<double>(m[k + static_cast<std::size_t>(d)]);
  };
  const double o = box_offset(*z.basis, static_cast<int>(c), beta, v[k], before);
  return cell_layout(z.cdf.a, beta * z.basis->diag[c], o);
}

// The box model's symbols of sub-vector j's coordinates (M, beta and V
// indexed by sub-vector), in coding order (k = n-1 .. 0), put to `sink`.
CEPAM_HD inline void box_subvector_symbols(const SymbolModel& z, std::size_t j,
                                           const std::int64_t* M, const double* beta,
                                           const double* V, SymbolSink& sink) {
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  const std::int64_t* m = M + j * n;
  AnsSymbol tmp[kMaxCellSymbols];
  for (std::size_t c = 0; c < n; ++c) {
    const CellLayout l = box_layout(z, c, beta[j], V + j * n, m);
    sink.put(tmp, cell_symbols(z.cdf, m[n - 1 - c], l, tmp));
  }
}

// The box model's symbols of the coordinates of sub-vectors [j0, j1), put
// to `sink`, which notes a sub-vector with a point frame.
CEPAM_HD inline void box_m_symbols(const SymbolModel& z, std::size_t j0, std::size_t j1,
                                   const std::int64_t* M, const double* beta, const double* V,
                                   SymbolSink& sink) {
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  for (std::size_t j = j0; j < j1; ++j) {
    if (point_framed(z.points, beta[j], V + j * n)) sink.flag = true;
    box_subvector_symbols(z, j, M, beta, V, sink);
  }
}

// The point model's stream's symbols of the coordinates of sub-vectors
// [j0, j1), as AnsSegmentEncoder::encode_block puts them: a sub-vector
// with a table (point_prepare, into T) its point's symbol, or the escape
// and then its box symbols; one without, its box symbols.  `sink` notes a
// sub-vector with a table.
CEPAM_HD inline void point_m_symbols(const SymbolModel& z, std::size_t j0, std::size_t j1,
                                     const std::int64_t* M, const double* beta,
                                     const double* V, PointTable& T, SymbolSink& sink) {
  const std::size_t n = static_cast<std::size_t>(z.basis->n);
  for (std::size_t j = j0; j < j1; ++j) {
    if (point_prepare(*z.point_basis, z.points, beta[j], V + j * n, T, PointFillCosets{},
                      PointBallProbabilities{})) {
      sink.flag = true;
      AnsSymbol point;
      const bool listed = point_symbol(point_find(*z.point_basis, T, M + j * n), T.count, T.cum,
                                       &point.start, &point.freq);
      sink.put(&point, 1);
      if (listed) continue;
    }
    box_subvector_symbols(z, j, M, beta, V, sink);
  }
}

// A body's symbols in units of work, a unit a GPU thread: for each stream
// (the box model's, then, where the lattice has a point model, the point
// model's), in each segment (S sub-vectors, the last shorter), each block
// (z.block sub-vectors, the last of a segment shorter) in pieces of
// kUnitSubvectors sub-vectors: the pieces' trial indices, then the
// pieces' coordinates, the order of AnsSegmentEncoder::encode_block.
// Every segment and block has the units of a whole one; those past its end
// are empty.  So stream r of segment s (r = 0: box, 1: point) is the run of
// units [(r segments + s) per_segment, (r segments + s + 1) per_segment).
inline constexpr std::size_t kUnitSubvectors = 256;
struct SymbolUnits {
  std::size_t N, S;
  std::size_t pieces;       // pieces a block
  std::size_t per_segment;  // units a segment's stream: blocks a segment x 2 pieces
  std::size_t segments;
  std::size_t streams;      // 1, or 2 with the point model
  std::size_t count;        // units in all
};

CEPAM_HD inline SymbolUnits symbol_units(const SymbolModel& z, std::size_t N, std::size_t S) {
  SymbolUnits u{};
  u.N = N;
  u.S = S;
  u.pieces = (z.block + kUnitSubvectors - 1) / kUnitSubvectors;
  u.per_segment = (S + z.block - 1) / z.block * 2 * u.pieces;
  u.segments = (N + S - 1) / S;
  u.streams = z.points.usable != 0 ? 2 : 1;
  u.count = u.streams * u.segments * u.per_segment;
  return u;
}

// The segment of unit `unit`, and whether it is of the point model's stream.
CEPAM_HD inline std::size_t unit_segment(const SymbolUnits& u, std::size_t unit, bool* point) {
  const std::size_t run = unit / u.per_segment;
  *point = run >= u.segments;
  return *point ? run - u.segments : run;
}

// Unit `unit`'s symbols (of the update's H[N], M[N n], beta[N], V[N n]):
// written at out unless out is nullptr (a count only); returns their
// number.  A box unit sets *flag when a sub-vector has a point frame.  A
// point unit has symbols only where framed is given and framed[s] is
// nonzero for its segment s (else none: the segment has no table), and
// sets *flag when a sub-vector has a table (T: room for one; not read by
// box units, so nullptr where there are no point units).
CEPAM_HD inline std::size_t unit_symbols(const SymbolModel& z, const SymbolUnits& u,
                                         std::size_t unit, const std::uint32_t* H,
                                         const std::int64_t* M, const double* beta,
                                         const double* V, const unsigned char* framed,
                                         PointTable* T, AnsSymbol* out, bool* flag) {
  bool point = false;
  const std::size_t s = unit_segment(u, unit, &point);
  if (point && (framed == nullptr || framed[s] == 0)) return 0;
  const std::size_t r = unit % u.per_segment;
  const std::size_t b = r / (2 * u.pieces), q = r % (2 * u.pieces);
  const bool coordinates = q >= u.pieces;
  const std::size_t piece = coordinates ? q - u.pieces : q;
  const std::size_t segment_end = u.N - s * u.S < u.S ? u.N : s * u.S + u.S;
  const std::size_t block0 = s * u.S + b * z.block;
  if (block0 >= segment_end) return 0;
  const std::size_t block_end = segment_end - block0 < z.block ? segment_end : block0 + z.block;
  const std::size_t j0 = block0 + piece * kUnitSubvectors;
  if (j0 >= block_end) return 0;
  const std::size_t j1 = block_end - j0 < kUnitSubvectors ? block_end : j0 + kUnitSubvectors;
  SymbolSink sink{out, 0, false};
  if (!coordinates) {
    h_symbols(z, j0, j1, H, sink);
  } else if (point) {
    point_m_symbols(z, j0, j1, M, beta, V, *T, sink);
  } else {
    box_m_symbols(z, j0, j1, M, beta, V, sink);
  }
  if (sink.flag) *flag = true;
  return sink.k;
}

// The streams' runs from the units' (host code): at[0 .. u.count] are the
// units' first symbols (at[u.count]: all of them); first[k] = at[k
// per_segment] for each stream k (k = r segments + s: stream r of segment
// s), and first[streams segments] = at[u.count].
inline void stream_offsets(const SymbolUnits& u, const std::uint64_t* at, std::uint64_t* first) {
  const std::size_t runs = u.streams * u.segments;
  for (std::size_t k = 0; k <= runs; ++k) first[k] = at[k * u.per_segment];
}

// --- The decoder's side --------------------------------------------------------
//
// The inverses of geometric_symbols and cell_symbols on a RansReader
// (coding/rans_core.hpp), for a GPU's decoder and its host twin: the CPU's
// GeometricCoder::decode and CellCoder::decode read the same symbols (by
// guides, guesses and SIMD runs that find the same ones: each slot lies
// in exactly one interval) and refuse the same streams.

// The decoders take a RansReader, or any reader with rans_peek and
// rans_advance (the CPU's AnsDecoder, coding/rans.hpp, for its rare paths).

// The trial index *h after its escape symbol: h - 1 in 16 raw bits (an
// escaped h that has a symbol of its own is refused).
template <class Reader>
CEPAM_HD inline ReadStatus geometric_escape(const std::uint32_t* cum, Reader& r,
                                            std::uint32_t* h) {
  ReadStatus st = rans_advance(r, cum[kGeometricTable], kCellEscapeFreq);
  if (st != kReadOk) return st;
  std::uint32_t raw = 0;
  st = rans_raw(r, 16, &raw);
  *h = raw + 1;
  if (st == kReadOk && *h <= static_cast<std::uint32_t>(kGeometricTable))
    return kReadNonCanonicalTrial;
  return st;
}

// Trial index *h: 1 where it is not coded (cum = nullptr), else its symbol,
// or the escape (geometric_escape).
template <class Reader>
CEPAM_HD inline ReadStatus geometric_decode(const std::uint32_t* cum, Reader& r,
                                            std::uint32_t* h) {
  *h = 1;
  if (cum == nullptr) return kReadOk;
  const std::uint32_t s = rans_peek(r);
  if (s < cum[kGeometricTable]) {
    int lo = 0, hi = kGeometricTable;  // cum[lo] <= s < cum[hi]
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      if (cum[mid] <= s) lo = mid;
      else hi = mid;
    }
    *h = static_cast<std::uint32_t>(lo + 1);
    return rans_advance(r, cum[lo], cum[lo + 1] - cum[lo]);
  }
  return geometric_escape(cum, r, h);
}

// The decoder's first guess of the symbol q whose interval holds slot s,
// in [0, count), from the model's quantile table (quantile[level] for the
// slot's top kCdfKnotBits bits).  The slot lies where F(edge) R + q
// reaches s, F the model's CDF.  Taking F = s / 2^kProbBits (the terms q
// and 2^kProbBits - R nearly cancel), the model's quantile sits u grid
// cells above -A, that is at cell coordinate z_lo + u (z_hi - z_lo) /
// kCells + 1/2 (cell j spans [j, j + 1)), or guess_a + u guess_b cells
// above cell lo.  Any value in [0, count) is a valid guess: non-finite
// layouts just guess badly.
CEPAM_HD inline std::int64_t cell_guess(const double* quantile, const CellLayout& l,
                                        std::uint32_t s) {
  const double u = quantile[s >> (kProbBits - kCdfKnotBits)];
  const double x = l.guess_a + u * l.guess_b;
  if (!(x > 0.0)) return 0;
  if (!(x < static_cast<double>(l.count << l.shift))) return l.count - 1;
  return static_cast<std::int64_t>(x) >> l.shift;  // x > 0: truncation is floor
}

// The largest q with cum(q) <= s, from a guess q in [0, count): gallops
// away from the guess until the answer is bracketed, then bisects, so that
// it takes O(log |answer - guess|) steps.  cum(0) = 0 <= s < cum(count)
// always (s below the escape slot), which bounds both gallops.
CEPAM_HD inline std::int64_t cell_search(const CdfView& m, const CellLayout& l, std::uint32_t s,
                                         std::int64_t q) {
  std::int64_t lo, hi;  // cum(lo) <= s < cum(hi)
  std::int64_t step = 1;
  if (cell_cum(m, l, q) <= s) {
    lo = q;
    hi = q + 1;
    while (cell_cum(m, l, hi) <= s) {
      lo = hi;
      hi = hi + step < l.count ? hi + step : l.count;
      step *= 2;
    }
  } else {  // q > 0 here
    hi = q;
    lo = q - 1;
    while (cell_cum(m, l, lo) > s) {
      hi = lo;
      lo = lo - step > 0 ? lo - step : 0;
      step *= 2;
    }
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (cell_cum(m, l, mid) <= s) lo = mid;
    else hi = mid;
  }
  return lo;
}

// The symbol q whose interval [start, end) holds slot s (below the escape
// slot): the guess, else the search from it.
CEPAM_HD inline std::int64_t cell_symbol(const CdfView& m, const double* quantile,
                                         const CellLayout& l, std::uint32_t s,
                                         std::uint32_t& start, std::uint32_t& end) {
  std::int64_t q = cell_guess(quantile, l, s);
  start = cell_cum(m, l, q);
  end = cell_cum(m, l, q + 1);
  if (start > s || end <= s) {
    q = cell_search(m, l, s, q);
    start = cell_cum(m, l, q);
    end = cell_cum(m, l, q + 1);
  }
  return q;
}

// Coordinate *j in table l: its symbol, or (coarse) its coarse symbol and
// offset, or the escape and the value raw (escaped_value_symbols); a value
// the encoder would have coded otherwise is refused.
template <class Reader>
CEPAM_HD inline ReadStatus cell_decode(const CdfView& m, const double* quantile,
                                       const CellLayout& l, Reader& r, std::int64_t* j) {
  const std::uint32_t s = rans_peek(r);
  if (s >= kProbScale - kCellEscapeFreq) {
    ReadStatus st = rans_advance(r, kProbScale - kCellEscapeFreq, kCellEscapeFreq);
    if (st != kReadOk) return st;
    std::uint32_t len = 0;
    st = rans_raw(r, 6, &len);
    if (st != kReadOk) return st;
    if (len > 55) return kReadEscapeRange;
    std::uint64_t z = 0;
    if (len > 0 && (st = rans_raw_long(r, static_cast<int>(len), &z)) != kReadOk) return st;
    *j = unzigzag64(z);
    if (*j > kMaxAbsM || *j < -kMaxAbsM) return kReadEscapeRange;
    if (*j >= l.lo && *j <= l.hi) return kReadNonCanonicalEscape;
    return kReadOk;
  }
  std::uint32_t start = 0, end = 0;
  const std::int64_t lo = cell_symbol(m, quantile, l, s, start, end);
  ReadStatus st = rans_advance(r, start, end - start);
  if (st != kReadOk) return st;
  if (l.shift == 0) {
    *j = l.lo + lo;
    return kReadOk;
  }
  std::uint64_t offset = 0;
  st = rans_raw_long(r, l.shift, &offset);
  if (st != kReadOk) return st;
  *j = l.lo + static_cast<std::int64_t>((static_cast<std::uint64_t>(lo) << l.shift) | offset);
  return *j > l.hi ? kReadOutsideTable : kReadOk;
}

}  // namespace cepam
