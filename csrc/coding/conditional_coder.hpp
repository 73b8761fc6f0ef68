// Entropy models of the LRSUQ symbols, for the rANS coder.
//
// GeometricCoder: the trial index H ~ Geometric(p) exactly (p the lattice's
// acceptance probability), as an integer table for H = 1 .. kTable with an
// escape for larger H (raw 16 bits).
//
// CellCoder: one lattice coordinate j, conditional on what the decoder
// already knows.  Coordinate k of the sub-vector lies, given the latent
// (scale beta), the dither V_H and the coordinates already decoded, in the
// cell [g (j - 1/2) + o, g (j + 1/2) + o) of the source law F (see
// SourceModel), with g = beta G_kk and o = beta (sum_{i>k} G_ik m_i + V_k)
// for a lower-triangular basis G; exactly so on Z^n, approximately (the
// Voronoi cell is not a box) on the other lattices.  So
//   P(j) ~ F(g (j + 1/2) + o) - F(g (j - 1/2) + o)
// over the cells meeting [-A, A] (plus a margin), as a cumulative table
// computed on the fly: cum(q) = floor(F(edge_q) R) + q, which gives every
// symbol a frequency of at least 1 and is monotone by construction.  When
// there are more than kMaxSymbols cells (tiny beta), 2^shift neighbouring
// cells form one coarse symbol and the offset inside it is sent raw: the
// source density is flat on that scale.  Values outside the table (possible
// off Z^n) take an escape symbol and a raw code.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "coding/bitstream.hpp"
#include "common/errors.hpp"
#include "common/format_limits.hpp"
#include "lattice/lattice.hpp"
#include "coding/rans.hpp"
#include "coding/source_model.hpp"
#include "coding/symbol_core.hpp"

namespace cepam {

class GeometricCoder {
 public:
  static constexpr int kTable = kGeometricTable;

  explicit GeometricCoder(double p);
  bool coded() const { return coded_; }
  // The symbols of h (coding/symbol_core.hpp's geometric_symbols).
  void encode(std::uint32_t h, AnsEncoder& enc) const {
    if (!coded_) return;
    // Written in place (room for 2), then the unused room dropped.
    const int k = geometric_symbols(cum_, h, enc.append(2));
    enc.truncate(enc.symbols() - 2 + static_cast<std::size_t>(k));
  }
  // The table geometric_symbols takes: nullptr where H is not coded.
  const std::uint32_t* table() const { return coded_ ? cum_ : nullptr; }
  std::uint32_t decode(AnsDecoder& dec) const;
  // decode for H[0..count) (SIMD where the processor has it).
  void decode_batch(std::size_t count, AnsDecoder& dec, std::uint32_t* H) const;
  // decode's common case (coded, no escape), for AnsDecoder::decode_run:
  // false for the escape slot; else h and the interval of its symbol.
  bool lookup(std::uint32_t s, std::uint32_t& h, std::uint32_t& start,
              std::uint32_t& freq) const {
    if (s >= cum_[kTable]) return false;
    int i = guide_[s >> (kProbBits - kGuideBits)];
    while (cum_[i + 1] <= s) ++i;  // ends below kTable, as s < cum_[kTable]
    h = static_cast<std::uint32_t>(i + 1);
    start = cum_[i];
    freq = cum_[i + 1] - cum_[i];
    return true;
  }

 private:
  static constexpr int kGuideBits = 8;

  bool coded_;
  std::uint32_t cum_[kTable + 2];  // cum_[h - 1] .. ; cum_[kTable] is the escape's start
  // guide_[t] = the smallest h - 1 whose interval ends above slot
  // t 2^(kProbBits - kGuideBits): where the decoder's scan starts.
  std::uint8_t guide_[1 << kGuideBits];
};

// The box model's tables on a lower-triangular basis G (n <= kMaxN; the
// lattice/lattice.hpp TriangularBasis): coordinate k of a sub-vector, coded
// in the order k = n-1 .. 0 (coding position c = n-1-k), lies in the table
// g_k = beta G_kk, o_k = beta (V_k + sum_{i>k} m_i G_ik), the sum taken in
// order of i over the nonzero G_ik (coding/symbol_core.hpp's BoxTerms and
// box_offset, shared with a GPU).  On E8 this leaves two terms of seven at
// most, on D4 three (all at k = 0).
class BoxBasis {
 public:
  static constexpr int kMaxN = 8;

  explicit BoxBasis(const TriangularBasis& basis);
  int n() const { return n_; }
  // G_kk of coding position c.
  double diagonal(int c) const { return terms_.diag[c]; }
  double inv_diagonal(int c) const { return inv_diag_[c]; }  // 1 / G_kk
  // o at coding position c of a sub-vector, from its beta and V_k, where
  // m(d) is m_{k+d} (as a double, exact: |m| <= 2^53), the coordinate d
  // positions before in coding order.
  template <class M>
  double offset(int c, double beta, double v, M&& m) const {
    return box_offset(terms_, c, beta, v, m);
  }
  const BoxTerms& terms() const { return terms_; }
  // The tables of whole sub-vectors [0, count) in coding order, as an
  // encoder that knows every coordinate computes them: sub-vector j of M[j
  // n ..], V[j n ..] and beta[j] gets, at position i = j n + c,
  // coded[i] = m_k, g[i] = beta G_kk and o[i] = offset(c, ...), k =
  // n - 1 - c.
  void tables(const std::int64_t* M, const double* V, const double* beta, std::size_t count,
              std::int64_t* coded, double* g, double* o) const;
  // offset for a decoder that holds the Near <= kNear coordinates before
  // this one apart (in registers): near[d - 1] is the coordinate d
  // positions before, m(d) those further back; the same terms in the same
  // order (G_ik is zero where d > c: near[d - 1] is then the previous
  // sub-vector's).
  static constexpr int kNear = 3;
  template <int Near, class M>
  double offset_near(int c, double beta, double v, const double* near, M&& m) const {
    double shift = v;
    for (int d = 1; d <= Near; ++d)
      if (near_kind_[c][d - 1] != kZero) shift += near[d - 1] * near_coef_[c][d - 1];
    for (int t = far_[c][Near]; t < terms_.first[c + 1]; ++t)
      shift += m(terms_.dist[t]) * terms_.coef[t];
    return beta * shift;
  }
  // For guesses only (no coded value depends on it): y - sum_{i>k} m_i
  // G_ik / G_kk rounded to nearest (by adding and subtracting 1.5 2^52,
  // exact for |y| < 2^51), with near[] and m(d) as in offset_near.  A
  // near term of an integer ratio is taken after the rounding (round(y + t)
  // = round(y) + t for an integer t, ties aside), so that on E8's chain
  // (m_k ~ m_{k+1} + ...) a guess waits for the one before it by a product
  // and a difference only.
  template <int Near, class M>
  double guess_near(int c, double y, const double* near, M&& m) const {
    for (int t = terms_.first[c + 1] - 1; t >= far_[c][Near]; --t)
      y -= m(terms_.dist[t]) * ratio_[t];
    for (int d = Near; d >= 1; --d)
      if (near_kind_[c][d - 1] == kFraction) y -= near[d - 1] * near_ratio_[c][d - 1];
    constexpr double kRound = 0x1.8p52;
    double g = (y + kRound) - kRound;
    for (int d = Near; d >= 1; --d)
      if (near_kind_[c][d - 1] == kWhole) g -= near[d - 1] * near_ratio_[c][d - 1];
    return g;
  }

 private:
  int n_;
  BoxTerms terms_;  // G_kk and position c's terms (t in [first[c], first[c + 1]))
  double inv_diag_[kMaxN];
  int far_[kMaxN][kNear + 1];  // the first term of position c with d > Near
  double ratio_[kMaxN * (kMaxN - 1) / 2];  // term t's G_ik / G_kk
  // G_ik and G_ik / G_kk for d = i - k = 1 .. kNear (zero where i >= n).
  double near_coef_[kMaxN][kNear], near_ratio_[kMaxN][kNear];
  enum NearKind : unsigned char { kZero, kWhole, kFraction };  // of near_ratio_
  NearKind near_kind_[kMaxN][kNear];
};

// Encoder and decoder compute the same cumulative table (see above), from
// the coordinate's layout (a function of g and o alone, so that a decoder
// may compute it ahead).  The decoder finds its symbol from a guess by the
// model's inverse CDF, checked (and, if wrong, corrected by a bounded
// search) with the exact table, so the guess affects speed only.  The
// common paths are inline: they are the coder's inner loops.
class CellCoder {
 public:
  static constexpr std::int64_t kMaxSymbols = kCellMaxSymbols;
  static constexpr std::int64_t kMargin = kCellMargin;
  static constexpr std::uint32_t kEscapeFreq = kCellEscapeFreq;  // the escape: the last slot
  // Whether a SIMD decoder guesses a run of symbols whose first table has
  // cell width g by the finer guess (the model's quantile at the slot, on
  // the line of its level): where the table has kFineCells cells or more
  // (2 A / g: a few hundred at rms/sigma 100, a few at 0.5, where the plain
  // guess is the faster).  Speed only: every guess is checked exactly.
  static constexpr double kFineCells = 128.0;
  static bool fine_guess(const SourceModel& model, double g) {
    return g * kFineCells <= 2.0 * model.range();
  }

  // The tables' arithmetic is coding/symbol_core.hpp's, shared with a GPU.
  using Layout = CellLayout;

  explicit CellCoder(const SourceModel& model)
      : model_(model), a_(model.range()), cdf_(model.cdf_view()) {}

  Layout layout(double g, double o) const;
  void encode(std::int64_t j, const Layout& l, AnsEncoder& enc) const;
  std::int64_t decode(const Layout& l, AnsDecoder& dec) const;
  // decode's common case, for AnsDecoder::decode_run: false when slot s is
  // the escape or the table is coarse; else the coordinate j and the
  // interval of its symbol.
  bool lookup(const Layout& l, std::uint32_t s, std::int64_t& j, std::uint32_t& start,
              std::uint32_t& freq) const;
  // The coarse symbol q holding slot s (below the escape slot), and its
  // interval [start, end).
  std::int64_t symbol(const Layout& l, std::uint32_t s, std::uint32_t& start,
                      std::uint32_t& end) const;

  // Runs of coordinates whose tables are known in advance (diagonal bases):
  // coordinate i < count is j[i] in the table layout(g[i], o[i]).  The
  // same symbols and values as encode and decode one by one; SIMD where
  // the processor has it, and the layouts computed off the decoder's
  // serial chain.
  // With starts: starts[i] = enc.symbols() before coordinate i's symbols.
  void encode_batch(const std::int64_t* j, const double* g, const double* o, std::size_t count,
                    AnsEncoder& enc, std::size_t* starts = nullptr) const;
  void decode_batch(const double* g, const double* o, std::size_t count, AnsDecoder& dec,
                    std::int64_t* j) const;
  // decode_batch of k <= kTogether streams b[0..k) at once (segments of a
  // body), their decoding chains interleaved: the same values as k calls.
  struct Batch {
    const double* g;
    const double* o;
    std::size_t count;
    AnsDecoder* dec;
    std::int64_t* j;
  };
  static constexpr std::size_t kTogether = 4;
  void decode_batches(const Batch* b, std::size_t k) const;
  // The streams decode_batches interleaves to advantage on this processor
  // (4 with AVX-512, two streams a register; else 2).
  static std::size_t streams_together();

  // The coordinates of sub-vectors [0, count) of a non-diagonal basis
  // (their beta[count] and V[count n]) into M[count n], with decode's
  // symbols and values.  The tables depend on the coordinates decoded
  // before, a serial chain; it is cut short by guessing each coordinate
  // from its slot with a linear form of the coordinates above (the table's
  // guess without its divisions), so that the processor runs the exact
  // table and its check (a well-predicted branch) off the chain.
  void decode_box(const BoxBasis& basis, std::size_t count, const double* beta, const double* V,
                  AnsDecoder& dec, std::int64_t* M) const;
  // decode_box of two streams at once (two segments of a body), their
  // decoding chains interleaved: the same values as two calls.
  struct BoxBlock {
    std::size_t count;
    const double* beta;
    const double* V;
    AnsDecoder* dec;
    std::int64_t* M;
  };
  void decode_boxes(const BoxBasis& basis, const BoxBlock& b0, const BoxBlock& b1) const;
  // cum(q) for 0 < q < count, given the cell's lower edge in cells,
  // double(lo + (q << shift)) - 0.5.
  std::uint32_t cum_at(const Layout& l, double edge_cells, std::int64_t q) const;

 private:
  std::uint32_t cum(const Layout& l, std::int64_t q) const;
  // The rarer path, out of line.
  std::int64_t decode_rare(const Layout& l, AnsDecoder& dec) const;  // escape or coarse

  const SourceModel& model_;
  double a_;
  CdfView cdf_;  // model_'s tables
};

inline CellCoder::Layout CellCoder::layout(double g, double o) const {
  return cell_layout(a_, g, o);
}

inline std::uint32_t CellCoder::cum(const Layout& l, std::int64_t q) const {
  return cell_cum(cdf_, l, q);
}

inline std::uint32_t CellCoder::cum_at(const Layout& l, double edge_cells, std::int64_t q) const {
  return cell_cum_at(cdf_, l, edge_cells, q);
}

inline void CellCoder::encode(std::int64_t j, const Layout& l, AnsEncoder& enc) const {
  // Written in place (room for the most a coordinate takes), then the
  // unused room dropped.
  const int k = cell_symbols(cdf_, j, l, enc.append(kMaxCellSymbols));
  enc.truncate(enc.symbols() - static_cast<std::size_t>(kMaxCellSymbols) + static_cast<std::size_t>(k));
}

// (coding/symbol_core.hpp's cell_symbol: a guess from the model's
// quantile table, else a search from it; shared with a GPU's decoder.)
inline std::int64_t CellCoder::symbol(const Layout& l, std::uint32_t s, std::uint32_t& start,
                                      std::uint32_t& end) const {
  return cell_symbol(cdf_, model_.quantile_table(), l, s, start, end);
}

inline bool CellCoder::lookup(const Layout& l, std::uint32_t s, std::int64_t& j,
                              std::uint32_t& start, std::uint32_t& freq) const {
  if (s >= kProbScale - kEscapeFreq || l.shift > 0) return false;
  std::uint32_t end;
  j = l.lo + symbol(l, s, start, end);  // <= lo + count - 1 = hi
  freq = end - start;
  return true;
}

inline std::int64_t CellCoder::decode(const Layout& l, AnsDecoder& dec) const {
  std::int64_t j;
  std::uint32_t start, freq;
  if (!lookup(l, dec.peek(), j, start, freq)) return decode_rare(l, dec);
  dec.advance(start, freq);
  return j;
}

}  // namespace cepam
