// CellCoder's tables (coding/conditional_coder.hpp; coding/symbol_core.hpp's
// cell_layout, cell_cum_at and model_cdf) for S::L coordinates at once, one a
// lane, written once for the SIMD widths (internal header of
// coding/conditional_coder.cpp, four lanes, and
// coding/conditional_coder_avx512.cpp, eight lanes).
//
// S is a set of lane operations (common/lanes_avx2.hpp, lanes_avx512.hpp);
// every function mirrors, per lane, the scalar code's IEEE operations in the
// same order, branches turned into selections (common/simd_avx2.hpp gives
// the rules).  Only "plain" tables are computed exactly: finite, within 2^50
// cells of 0 (where the scalar clamps do nothing), not coarse (shift 0) and
// of at least 3 symbols.  Their cells and counts are small integers, exact
// as doubles, and cum(Q) = R + Q = 2^24 - 1.  The other lanes are flagged;
// the scalar code handles them.
//
// Include it after the target pragma of S (and conditional_coder.hpp
// before it), so that these templates are compiled for S's instruction set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "coding/conditional_coder.hpp"

namespace cepam::cell_lanes {

// A table lookup's form: S::gather (for throughput), or with Latency::Low
// S::gather_loads, one load a lane (for a decoder's serial chain).
enum class Latency { Any, Low };

template <class S>
struct Tables {
  using D = typename S::D;
  D g, o;
  D lo;       // the first cell
  D lo_half;  // lo - 1/2
  D range;    // R
  typename S::I32 count;  // Q
  D guess_a, guess_b;
  unsigned plain;  // bit l set where lane l is plain
};

// CellCoder::layout.
template <class S>
inline Tables<S> layout(const SourceModel& model, typename S::D g, typename S::D o) {
  using D = typename S::D;
  using M = typename S::M;
  const double a = model.range();
  Tables<S> t;
  t.g = g;
  t.o = o;
  const D z_lo = S::div(S::sub(S::splat(-a), o), g);
  const D z_hi = S::div(S::sub(S::splat(a), o), g);
  const D v_lo = S::add(z_lo, S::splat(0.5));
  const D v_hi = S::add(z_hi, S::splat(0.5));
  const D lim = S::splat(0x1.0p50), minus_lim = S::splat(-0x1.0p50);
  const M finite = S::both(S::both(S::gt(v_lo, minus_lim), S::lt(v_lo, lim)),
                           S::both(S::gt(v_hi, minus_lim), S::lt(v_hi, lim)));
  const D margin = S::splat(static_cast<double>(CellCoder::kMargin));
  t.lo = S::sub(S::floor(v_lo), margin);
  const D hi = S::max(S::add(S::floor(v_hi), margin), t.lo);  // hi >= lo
  const D span = S::sub(hi, t.lo);
  const M small = S::both(S::ge(span, S::splat(2.0)),
                          S::lt(span, S::splat(static_cast<double>(CellCoder::kMaxSymbols))));
  t.plain = S::bits(S::both(finite, small));
  const D count = S::add(span, S::splat(1.0));
  t.count = S::trunc_i32(count);
  t.range = S::sub(S::splat(static_cast<double>(kProbScale - CellCoder::kEscapeFreq)), count);
  t.lo_half = S::sub(t.lo, S::splat(0.5));
  t.guess_a = S::sub(v_lo, t.lo);
  t.guess_b = S::mul(S::sub(z_hi, z_lo), S::splat(1.0 / SourceModel::kCells));
  return t;
}

template <class S, Latency L>
inline typename S::D lookup(const double* table, typename S::I32 i) {
  if constexpr (L == Latency::Low) return S::gather_loads(table, i);
  else return S::gather(table, i);
}

// SourceModel::cdf; the tables are read at an index clamped to the table
// (the scalar code's index wherever its value is used).
template <class S, Latency L>
inline typename S::D cdf(const SourceModel& model, typename S::D x) {
  using D = typename S::D;
  using M = typename S::M;
  using I32 = typename S::I32;
  const D a = S::splat(model.range());
  const M below = S::not_gt(x, S::splat(-model.range()));
  const M above = S::not_lt(x, a);
  const D u = S::mul(S::add(x, a), S::splat(model.inv_width()));
  const M wild = S::not_lt(u, S::splat(2.0 * SourceModel::kCells));
  const I32 i = S::min_i32(S::max_i32(S::trunc_i32(u), S::splat_i32(0)),
                           S::splat_i32(SourceModel::kCells - 1));
  // knot and slope from one word (their bit patterns read as doubles).
  D knot, slope;
  S::uint32_halves(lookup<S, L>(reinterpret_cast<const double*>(model.knot_slope_table()), i),
                   knot, slope);
  const D f = S::mul(S::add(knot, S::mul(S::sub(u, S::from_i32(i)), slope)),
                     S::splat(1.0 / SourceModel::kTableScale));
  return S::blend(below, S::blend(S::either(above, wild), f, S::splat(1.0)), S::splat(0.0));
}

// CellCoder::cum(q) for plain tables and 0 < q < Q (int32), given the
// cell's lower edge in cells, lo + q - 1/2 (double(cell) - 0.5 in the
// scalar code; exact both ways, as the table is plain).
template <class S, Latency L>
inline typename S::I32 cum(const SourceModel& model, const Tables<S>& t, typename S::I32 q,
                           typename S::D cell_edge) {
  const typename S::D edge = S::add(S::mul(t.g, cell_edge), t.o);
  const typename S::D f = S::mul(cdf<S, L>(model, edge), t.range);
  return S::add_i32(S::trunc_i32(f), q);  // f in [0, 2^24]: truncation is floor
}

// The intervals [start, end) = [cum(q), cum(q + 1)) of S::L symbols, q
// with the lower edge edge (cum's range: 0 < q < Q - 1).
template <class S, Latency L>
inline void interval(const SourceModel& model, const Tables<S>& t, typename S::I32 q,
                     typename S::D edge, typename S::I32& start, typename S::I32& end) {
  start = cum<S, L>(model, t, q, edge);
  end = cum<S, L>(model, t, S::add_i32(q, S::splat_i32(1)), S::add(edge, S::splat(1.0)));
}

// Whether q (as doubles) is in 1 .. Q - 2, where cum gives both ends.
template <class S>
inline typename S::M inside(const Tables<S>& t, typename S::D q_d) {
  return S::both(S::ge(q_d, S::splat(1.0)),
                 S::le(q_d, S::sub(S::from_i32(t.count), S::splat(2.0))));
}

// The model's quantile at each slot (< 2^24), in cells, for `guess`: on
// the line of the slot's 2^-12 level (SourceModel::quantile_line_table,
// level = slot >> 12), slot mod 2^12 slots past the level's start.  Finer
// than the level's own quantile, for tables of many cells a level.
template <class S, Latency L>
inline typename S::D quantile_line(const SourceModel& model, typename S::I32 slot) {
  using D = typename S::D;
  constexpr int kFine = kProbBits - SourceModel::kKnotBits;
  D start, slope;
  S::uint32_halves(lookup<S, L>(reinterpret_cast<const double*>(model.quantile_line_table()),
                                S::shr_i32(slot, kFine)),
                   start, slope);
  constexpr double kUnit = 1.0 / (1 << SourceModel::kLineBits);
  const D within = S::from_i32(S::and_i32(slot, S::splat_i32((1 << kFine) - 1)));
  return S::add(S::mul(start, S::splat(kUnit)),
                S::mul(slope, S::mul(within, S::splat(kUnit / (1 << kFine)))));
}

// CellCoder::decode's common case for S::L symbols whose tables t are plain
// and whose slots (in I32, none the escape's) are `slot`, given u, the
// model's quantile at each slot (SourceModel::quantile_cells of its 2^-12
// level, or finer: only speed depends on it): the guess q (CellCoder's),
// then the exact interval [start, end) of cell lo + q (read with L).
// Returns the lanes (bits) where q is the symbol: 0 < q < Q - 1 (cum's
// range for q and q + 1) and start <= slot < end; the others need the
// scalar search.
template <class S, Latency L>
inline unsigned guess(const SourceModel& model, const Tables<S>& t, typename S::I32 slot,
                      typename S::D u, typename S::I32& q, typename S::I32& start,
                      typename S::I32& end) {
  const typename S::D at = S::add(t.guess_a, S::mul(u, t.guess_b));  // within 2^31 (plain)
  q = S::trunc_i32(at);
  interval<S, L>(model, t, q, S::add(t.lo_half, S::trunc(at)), start, end);
  const unsigned inside = S::gt_i32(q, S::splat_i32(0)) &
                          S::gt_i32(S::sub_i32(t.count, S::splat_i32(1)), q);
  return inside & ~S::gt_i32(start, slot) & S::gt_i32(end, slot);
}

// CellCoder::encode for coordinates j[0 .. S::L) in tables (g, o): the
// symbol (start, freq) of each; returns the lanes (bits) for which these
// are the whole code: plain tables, 0 < q < Q - 1 (the cells at the ends
// of a table and those outside it go to the scalar code).
template <class S>
inline unsigned encode(const SourceModel& model, const std::int64_t* j, const double* g,
                       const double* o, AnsSymbol* symbols) {
  using D = typename S::D;
  using I32 = typename S::I32;
  static_assert(sizeof(AnsSymbol) == 8, "AnsSymbol is (start, freq), 32 bits each");
  const Tables<S> t = layout<S>(model, S::load(g), S::load(o));
  // j exactly as double (|j| <= 2^53, lrsuq/quantizer.hpp); q = j - lo, exact where it matters.
  const D q_d = S::sub(S::load_int64_as_double(j), t.lo);
  const unsigned in = S::bits(inside<S>(t, q_d));
  const I32 q = S::trunc_i32(q_d);
  I32 lo, hi;
  interval<S, Latency::Any>(model, t, q, S::add(t.lo_half, q_d), lo, hi);
  S::store_pairs(symbols, lo, S::sub_i32(hi, lo));
  return t.plain & in;
}

// CellCoder::encode_batch's coordinates [0, count - count mod S::L), S::L
// at a time (encode, the others of a group by the scalar code); returns
// how many it coded.
template <class S>
inline std::size_t encode_run(const CellCoder& cells, const SourceModel& model,
                              const std::int64_t* j, const double* g, const double* o,
                              std::size_t count, AnsEncoder& enc, std::size_t* starts) {
  constexpr std::size_t L = S::L;
  constexpr unsigned kAll = (1u << L) - 1;
  alignas(64) AnsSymbol symbols[L];
  std::size_t i = 0;
  for (; i + L <= count; i += L) {
    const unsigned plain = encode<S>(model, j + i, g + i, o + i, symbols);
    if (plain == kAll) {
      if (starts != nullptr)
        for (std::size_t l = 0; l < L; ++l) starts[i + l] = enc.symbols() + l;
      std::memcpy(enc.append(L), symbols, sizeof symbols);
      continue;
    }
    for (std::size_t l = 0; l < L; ++l) {
      if (starts != nullptr) starts[i + l] = enc.symbols();
      if ((plain >> l) & 1u) enc.put(symbols[l].start, symbols[l].freq);
      else cells.encode(j[i + l], cells.layout(g[i + l], o[i + l]), enc);
    }
  }
  return i;
}

// BoxBasis's tables of whole sub-vectors of N coordinates (N = 2, 4 or 8),
// S::L at a time, for sub-vectors [0, count - count mod S::L): sub-vector j
// with coordinates m = M[j N ..], dither V[j N ..] and scale beta[j] gets, at
// coding position c (coordinate k = N - 1 - c), coded[j N + c] = m_k,
// g[j N + c] = beta G_kk and o[j N + c] = BoxBasis::offset (box_offset: the
// same operations in the same order).  Lane l is a sub-vector; S needs the
// 64-bit integer conversion (AVX-512).  Returns how many it did.
template <class S, int N>
inline std::size_t box_tables(const BoxTerms& terms, const std::int64_t* M, const double* V,
                              const double* beta, std::size_t count, std::int64_t* coded,
                              double* g, double* o) {
  using D = typename S::D;
  constexpr std::size_t L = S::L, n = N;
  std::size_t j = 0;
  for (; j + L <= count; j += L) {
    const double* mrow[L];
    const double* vrow[L];
    double* crow[L];
    double* grow[L];
    double* orow[L];
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t e = (j + l) * n;
      mrow[l] = reinterpret_cast<const double*>(M + e);  // the integers' bit patterns
      vrow[l] = V + e;
      crow[l] = reinterpret_cast<double*>(coded + e);
      grow[l] = g + e;
      orow[l] = o + e;
    }
    D mc[N], md[N], vc[N], cc[N], gc[N], oc[N];
    S::template load_cols<N>(mrow, mc);
    S::template load_cols<N>(vrow, vc);
    for (int k = 0; k < N; ++k) md[k] = S::to_double(S::int64_of_bits(mc[k]));  // exact
    const D b = S::load(beta + j);
    for (int c = 0; c < N; ++c) {
      const int k = N - 1 - c;
      D shift = vc[k];
      for (int t = terms.first[c]; t < terms.first[c + 1]; ++t)
        shift = S::add(shift, S::mul(md[k + terms.dist[t]], S::splat(terms.coef[t])));
      cc[c] = mc[k];
      gc[c] = S::mul(b, S::splat(terms.diag[c]));
      oc[c] = S::mul(b, shift);
    }
    constexpr unsigned kAll = (1u << L) - 1;
    S::template store_rows<N>(cc, crow, kAll);
    S::template store_rows<N>(gc, grow, kAll);
    S::template store_rows<N>(oc, orow, kAll);
  }
  return j;
}

}  // namespace cepam::cell_lanes
