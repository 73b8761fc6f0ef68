// The A2, D4 and E8 closest points, dithers and LRSUQ trials of
// lattice/root_lattices.hpp, written once for SIMD lanes (internal header of
// lattice/voronoi_kernels*.cpp).
//
// Lane l of a register is one sub-vector; register k holds coordinate k of
// the S::L sub-vectors.  Every function mirrors, operation by operation, the
// scalar code it names (closest_dn, LatticeA2 / LatticeD4 / LatticeE8 ::closest,
// ::parallelepiped, ::dither, subvector::voronoi_trial and the acceptance
// test s = 0 + dev_0 + ... + dev_{n-1} <= r r), so each lane gets the
// scalar bits (common/simd_avx2.hpp explains the rules: the same IEEE
// operations in the same order, branches turned into selections).  E8's
// screen (E8::distance2, screened_trials) is the exception: it only picks
// the trials that run the exact code, by a margin that the roundings
// cannot cross.
// Integers are held in doubles: every value involved is an integer (or a
// half-integer) below 2^51 in magnitude, so exact, and converted to int64
// only at the end.
//
// The operations come from S, a set of static functions over S::L doubles
// (common/lanes_avx2.hpp, lanes_avx512.hpp and lanes_neon.hpp):
//   D splat(v); add, sub, mul, div; add_where(m, a, b) = m ? a + b : a;
//   floor; comparisons ge, gt, lt, le, eq (ordered, quiet) giving a mask M;
//   blend(m, a, b) = m ? b : a; both(m1, m2);
//   bits(m) (bit l = lane l); abs; odd(s) (integral s: is it odd);
//   int64_bits(f) (integral f: the int64 bit pattern); uniform_co(w) (w: the
//   words' bit patterns); gather(base, c) (lane l = base[c[l]]);
//   load_cols<N>(rows, cols) (cols[k] lane l = rows[l][k]) and
//   store_rows<N>(cols, rows, mask) (the inverse, for the lanes in mask);
//   for the decoder's reconstruction (AVX-512 only), 64-bit integers I:
//   int64_of_bits, iadd, isub (wrapping) and to_double (as static_cast).
// Each lattice type (A2, D4, E8 below, over S) provides N, parallelepiped(u,
// p) (p = G^T u), closest(t, p) (p = the closest point), closest(t, p, m)
// (also m = its basis coordinates, as doubles) and to_point(m, p) (m in
// integers).
// The file is included by voronoi_kernels.cpp (AVX2, four lanes) and
// voronoi_kernels_avx512.cpp (AVX-512, eight lanes), each under its own
// target pragma, so that these templates are compiled for that instruction
// set (a function without the target could not inline the intrinsics).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

// (Included before the target pragma, by voronoi_kernels.hpp and
// voronoi_kernels*.cpp.)
#include "lattice/lattice.hpp"
#include "lattice/registry.hpp"
// Lane code like this file (under the includer's target pragma): round_half_up.
#include "lattice/zn_lanes.hpp"

namespace cepam::kernels::lanes {

// lattice_detail::closest_dn for S::L lanes, in two steps.  Rounding:
// g[k] = round_half_up(t[k]), e[k] = t[k] - g[k]; returns the squared
// distance of the D_N point (sum e_k^2, + 1 - 2 |e_w| where the sum of the
// g is odd) and sets w to the coordinate to re-round (the first largest
// |e_k|) where that sum is odd, -1 where it is even.  The parity is that of
// the sum of the g as doubles (exact: N values below 2^47).  A zero g may
// be -0.0 (for t = -0.0), which no result depends on: the scalar code's
// integer 0 differs from it only in the sign of zeros that are added to
// non-zero values, squared or converted back to integers.
template <class S, int N>
inline typename S::D round_dn(const typename S::D* t, typename S::D* g, typename S::D* e,
                              typename S::D& w) {
  using D = typename S::D;
  using M = typename S::M;
  const D zero = S::splat(0.0), one = S::splat(1.0);
  D d2 = zero, worst = S::splat(-1.0), which = zero, sum = zero;
  for (int k = 0; k < N; ++k) {
    g[k] = round_half_up<S>(t[k]);
    e[k] = S::sub(t[k], g[k]);
    d2 = S::add(d2, S::mul(e[k], e[k]));
    sum = S::add(sum, g[k]);
    const D a = S::abs(e[k]);
    const M larger = S::gt(a, worst);  // the first largest error on ties
    which = S::blend(larger, which, S::splat(static_cast<double>(k)));
    worst = S::blend(larger, worst, a);
  }
  const M odd = S::odd(sum);
  w = S::blend(odd, S::splat(-1.0), which);
  // d2 + double(odd) (1 - 2 worst)
  const D fix = S::mul(S::blend(odd, zero, one), S::sub(one, S::mul(S::splat(2.0), worst)));
  return S::add(d2, fix);
}

// The re-rounding: g[w] moves one step towards t (up where e[w] >= 0).
template <class S, int N>
inline void fix_dn(typename S::D* g, const typename S::D* e, typename S::D w) {
  using D = typename S::D;
  for (int k = 0; k < N; ++k) {
    const D step = S::blend(S::ge(e[k], S::splat(0.0)), S::splat(-1.0), S::splat(1.0));
    g[k] = S::add_where(S::eq(w, S::splat(static_cast<double>(k))), g[k], step);
  }
}

template <class S>
struct A2 {
  using D = typename S::D;
  static constexpr int N = 2;
  static constexpr bool kScreened = false;  // (0.91 of its trials accepted)
  static D h() { return S::splat(std::sqrt(3.0) * 0.5); }  // LatticeA2::h()

  // p = G^T (a, b) = (a + b / 2, b h).
  static void combine(D a, D b, D* p) {
    p[0] = S::add(a, S::mul(b, S::splat(0.5)));
    p[1] = S::mul(b, h());
  }

  static void parallelepiped(const D* u, D* p) { combine(u[0], u[1], p); }

  // LatticeA2::to_point of integer basis coordinates (S::I).
  template <class I>
  static void to_point(const I* m, D* p) {
    combine(S::to_double(m[0]), S::to_double(m[1]), p);
  }

  // The point G^T (m0, m1) and its squared distance from t,
  // (0 + (t0 - p0)^2) + (t1 - p1)^2.
  static D point(const D* t, D m0, D m1, D* p) {
    combine(m0, m1, p);
    const D d0 = S::sub(t[0], p[0]), d1 = S::sub(t[1], p[1]);
    return S::add(S::add(S::splat(0.0), S::mul(d0, d0)), S::mul(d1, d1));
  }

  // LatticeA2::closest: the rectangular lattice Z x sqrt(3) Z (basis
  // coordinates (a - b, 2 b)) and its shift by (1/2, sqrt(3)/2) ((a - b,
  // 2 b + 1)), each rounded per coordinate; the nearer, the unshifted one
  // on ties.  m: the basis coordinates.
  static void closest(const D* t, D* p, D* m) {
    const D s = S::div(t[1], S::mul(S::splat(2.0), h()));
    const D a0 = round_half_up<S>(t[0]), b0 = round_half_up<S>(s);
    const D a1 = round_half_up<S>(S::sub(t[0], S::splat(0.5)));
    const D b1 = round_half_up<S>(S::sub(s, S::splat(0.5)));
    const D m00 = S::sub(a0, b0), m01 = S::add(b0, b0);
    const D m10 = S::sub(a1, b1), m11 = S::add(S::add(b1, b1), S::splat(1.0));
    D p0[2], p1[2];
    const D d0 = point(t, m00, m01, p0);
    const D d1 = point(t, m10, m11, p1);
    const typename S::M second = S::lt(d1, d0);
    m[0] = S::blend(second, m00, m10);
    m[1] = S::blend(second, m01, m11);
    p[0] = S::blend(second, p0[0], p1[0]);
    p[1] = S::blend(second, p0[1], p1[1]);
  }
  static void closest(const D* t, D* p) {
    D m[2];
    closest(t, p, m);
  }
};

template <class S>
struct D4 {
  using D = typename S::D;
  static constexpr int N = 4;
  static constexpr bool kScreened = false;  // (0.62 of its trials accepted)

  // p = G^T u: (((2 u0 + u1) + u2) + u3, u1, u2, u3).
  static void parallelepiped(const D* u, D* p) {
    p[0] = S::add(S::add(S::add(S::mul(S::splat(2.0), u[0]), u[1]), u[2]), u[3]);
    p[1] = u[1];
    p[2] = u[2];
    p[3] = u[3];
  }

  // LatticeD4::to_point, in integers: (2 m0 + m1 + m2 + m3, m1, m2, m3).
  template <class I>
  static void to_point(const I* m, D* p) {
    p[0] = S::to_double(S::iadd(S::iadd(S::iadd(S::iadd(m[0], m[0]), m[1]), m[2]), m[3]));
    for (int k = 1; k < 4; ++k) p[k] = S::to_double(m[k]);
  }

  static void closest(const D* t, D* p) {
    D e[4], w;
    round_dn<S, 4>(t, p, e, w);
    fix_dn<S, 4>(p, e, w);
  }

  // With the basis coordinates m of the point p: (p0 - p1 - p2 - p3) / 2, p1, p2, p3.
  static void closest(const D* t, D* p, D* m) {
    closest(t, p);
    m[3] = p[3];
    m[2] = p[2];
    m[1] = p[1];
    m[0] = S::mul(S::sub(S::sub(S::sub(p[0], p[1]), p[2]), p[3]), S::splat(0.5));
  }
};

template <class S>
struct E8 {
  using D = typename S::D;
  static constexpr int N = 8;
  // Its trials go through screened_trials (0.25 of them accepted).
  static constexpr bool kScreened = true;
  static double rho() { return LatticeE8::rho(); }

  // The squared distance from t to the lattice, rounded (for the screen of
  // screened_trials, not bit for bit as closest): the smaller of D8's and
  // D8 + 1/2's, from one floor a coordinate.  With f = floor(t_k) and
  // a = the distance from t_k to Z, b = 1/2 - a that to Z + 1/2: D8's point
  // rounds each t_k (f + 1 where t_k - f >= 1/2) and, where their sum is odd,
  // moves the coordinate with the largest a (squared distance + 1 - 2 a);
  // D8 + 1/2's takes f + 1/2, likewise with b and the sum of the f.
  static D distance2(const D* t) {
    const D zero = S::splat(0.0), half = S::splat(0.5), one = S::splat(1.0);
    D sum = zero, ups = zero, sa = zero, sb = zero, amax = zero, bmax = zero;
    for (int k = 0; k < 8; ++k) {
      const D f = S::floor(t[k]);
      const D c = S::sub(S::sub(t[k], f), half);  // in [-1/2, 1/2)
      const D b = S::abs(c), a = S::sub(half, b);
      sum = S::add(sum, f);
      ups = S::add_where(S::ge(c, zero), ups, one);
      sa = S::add(sa, S::mul(a, a));
      sb = S::add(sb, S::mul(b, b));
      amax = S::max(amax, a);
      bmax = S::max(bmax, b);
    }
    const D two = S::splat(2.0);
    const D d0 = S::add_where(S::odd(S::add(sum, ups)), sa, S::sub(one, S::mul(two, amax)));
    const D d1 = S::add_where(S::odd(sum), sb, S::sub(one, S::mul(two, bmax)));
    return S::blend(S::lt(d1, d0), d0, d1);
  }

  // p7 = u7 / 2; p6 = u6 + u7 / 2; p_k = (u_k - u_{k+1}) + u7 / 2; p0 = (2 u0 - u1) + u7 / 2.
  static void parallelepiped(const D* u, D* p) {
    const D h7 = S::mul(u[7], S::splat(0.5));
    p[7] = h7;
    p[6] = S::add(u[6], h7);
    for (int k = 1; k <= 5; ++k) p[k] = S::add(S::sub(u[k], u[k + 1]), h7);
    p[0] = S::add(S::sub(S::mul(S::splat(2.0), u[0]), u[1]), h7);
  }

  // LatticeE8::to_point, the doubled coordinates in integers: P7 = m7;
  // P6 = 2 m6 + m7; P_k = 2 (m_k - m_{k+1}) + m7; P0 = 4 m0 - 2 m1 + m7;
  // p = double(P) / 2.
  template <class I>
  static void to_point(const I* m, D* p) {
    const I m7 = m[7];
    I P[8];
    P[7] = m7;
    P[6] = S::iadd(S::iadd(m[6], m[6]), m7);
    for (int k = 1; k <= 5; ++k) {
      const I d = S::isub(m[k], m[k + 1]);
      P[k] = S::iadd(S::iadd(d, d), m7);
    }
    const I m0x2 = S::iadd(m[0], m[0]);
    P[0] = S::iadd(S::isub(S::iadd(m0x2, m0x2), S::iadd(m[1], m[1])), m7);
    for (int k = 0; k < 8; ++k) p[k] = S::mul(S::to_double(P[k]), S::splat(0.5));
  }

  // D8 decodes t into g0 and t - 1/2 into g1; the nearer of g0 and
  // g1 + 1/2, D8 on ties.  Both are rounded, and only the nearer re-rounded
  // (g1 + 1/2 moves by the step of g1).
  static void closest(const D* t, D* p) {
    D s[8], g0[8], g1[8], e0[8], e1[8], w0, w1;
    for (int k = 0; k < 8; ++k) s[k] = S::sub(t[k], S::splat(0.5));
    const D d0 = round_dn<S, 8>(t, g0, e0, w0);
    const D d1 = round_dn<S, 8>(s, g1, e1, w1);
    const typename S::M second = S::lt(d1, d0);
    for (int k = 0; k < 8; ++k) {
      p[k] = S::blend(second, g0[k], S::add(g1[k], S::splat(0.5)));
      e0[k] = S::blend(second, e0[k], e1[k]);
    }
    fix_dn<S, 8>(p, e0, S::blend(second, w0, w1));
  }

  // With the basis coordinates m of the point p, from its doubled
  // coordinates P = 2 p (2 g0 or 2 g1 + 1): m7 = P7; m6 = (P6 - m7) / 2;
  // m_k = (P_k - m7) / 2 + m_{k+1}; m0 = ((P0 - m7) / 2 + m1) / 2.
  static void closest(const D* t, D* p, D* m) {
    closest(t, p);
    const D half = S::splat(0.5);
    D P[8];
    for (int k = 0; k < 8; ++k) P[k] = S::add(p[k], p[k]);
    const D m7 = P[7];
    m[7] = m7;
    m[6] = S::mul(S::sub(P[6], m7), half);
    for (int k = 5; k >= 1; --k) m[k] = S::add(S::mul(S::sub(P[k], m7), half), m[k + 1]);
    m[0] = S::mul(S::add(S::mul(S::sub(P[0], m7), half), m[1]), half);
  }
};

// VoronoiLattice::dither of the words' columns w (bit patterns): v = p - Q(p),
// p = G^T u, u_k = uniform_co(w_k).
template <class S, class Lat>
inline void dither(const typename S::D* w, typename S::D* v) {
  using D = typename S::D;
  constexpr int N = Lat::N;
  D u[N], p[N], c[N];
  for (int k = 0; k < N; ++k) u[k] = S::uniform_co(w[k]);
  Lat::parallelepiped(u, p);
  Lat::closest(p, c);
  for (int k = 0; k < N; ++k) v[k] = S::sub(p[k], c[k]);
}

// voronoi_dither (lattice/voronoi_kernels.hpp) for the whole groups of S::L.
template <class S, class Lat>
inline std::size_t dithers(const std::uint64_t* w, std::size_t count, double* v) {
  using D = typename S::D;
  constexpr int N = Lat::N, L = S::L;
  const double* wd = reinterpret_cast<const double*>(w);  // the words' bit patterns
  std::size_t c = 0;
  for (; c + L <= count; c += L) {
    const double* wrow[L];
    double* vrow[L];
    for (int l = 0; l < L; ++l) {
      wrow[l] = wd + (c + static_cast<std::size_t>(l)) * N;
      vrow[l] = v + (c + static_cast<std::size_t>(l)) * N;
    }
    D wc[N], out[N];
    S::template load_cols<N>(wrow, wc);
    dither<S, Lat>(wc, out);
    S::template store_rows<N>(out, vrow, (1u << L) - 1);
  }
  return c;
}

// voronoi_reconstruct (lattice/voronoi_kernels.hpp) for the whole groups
// of S::L sub-vectors, as VoronoiLattice::reconstruct_batch: y = T(beta (p +
// v)), p = to_point(q) (its integer arithmetic wraps as the scalar code's
// does; S::to_double rounds as static_cast).
template <class S, class Lat, class T>
inline std::size_t reconstructs(const std::int64_t* q, const double* v, const double* beta,
                                std::size_t count, T* y) {
  using D = typename S::D;
  constexpr int N = Lat::N, L = S::L;
  constexpr std::size_t n = static_cast<std::size_t>(N);
  std::size_t c = 0;
  for (; c + L <= count; c += L) {
    const double* qrow[L];
    const double* vrow[L];
    std::size_t e[L];
    double out[L * N];
    double* orow[L];
    for (int l = 0; l < L; ++l) {
      e[l] = (c + static_cast<std::size_t>(l)) * n;
      qrow[l] = reinterpret_cast<const double*>(q + e[l]);  // the integers' bit patterns
      vrow[l] = v + e[l];
      if constexpr (std::is_same_v<T, double>) orow[l] = y + e[l];  // straight into y
      else orow[l] = out + l * N;
    }
    D qc[N], vc[N], p[N];
    typename S::I m[N];
    S::template load_cols<N>(qrow, qc);
    S::template load_cols<N>(vrow, vc);
    for (int k = 0; k < N; ++k) m[k] = S::int64_of_bits(qc[k]);
    Lat::to_point(m, p);
    const D b = S::gather(beta, e);  // beta is repeated per coordinate
    for (int k = 0; k < N; ++k) p[k] = S::mul(b, S::add(p[k], vc[k]));
    S::template store_rows<N>(p, orow, (1u << L) - 1);
    if constexpr (!std::is_same_v<T, double>)
      for (std::size_t i = 0; i < L * n; ++i) y[c * n + i] = static_cast<T>(out[i]);
  }
  return c;
}

// One trial, number `trial`, of the S::L sub-vectors c[l] (lane l; the
// first `valid` are real, the others copies), as subvector::voronoi_trial
// and its acceptance test: tt = their inputs t (columns), wrow[l] = lane l's
// dither words.  The valid lanes get H, q and (unless V is null) V, the
// rejected ones too: the trial that accepts a sub-vector writes them again,
// last.  (Writing only the accepted lanes branched on random bits, a
// misprediction or two a group.)  Returns the accepted lanes' bits.
template <class S, class Lat>
inline unsigned exact_trial(std::uint32_t trial, const typename S::D* tt,
                            const double* const* wrow, const std::size_t* c, std::size_t valid,
                            const double* xs, const double* beta, const double* radius,
                            std::uint32_t* H, std::int64_t* q, double* V) {
  using D = typename S::D;
  constexpr int N = Lat::N, L = S::L;
  constexpr std::size_t n = static_cast<std::size_t>(N);
  // subvector::voronoi_trial: the dither v, the closest point p of t - v.
  D wc[N], v[N], s[N], p[N], m[N], xx[N];
  S::template load_cols<N>(wrow, wc);
  dither<S, Lat>(wc, v);
  for (int k = 0; k < N; ++k) s[k] = S::sub(tt[k], v[k]);
  Lat::closest(s, p, m);
  // Accepted where 0 + sum_k (beta (p_k + v_k) - xs_k)^2 <= r r.
  const double* xrow[L];
  for (int l = 0; l < L; ++l) xrow[l] = xs + c[l] * n;
  S::template load_cols<N>(xrow, xx);
  const D b = S::gather(beta, c);
  const D rr = S::gather(radius, c);
  D sum = S::splat(0.0);
  for (int k = 0; k < N; ++k) {
    const D d = S::sub(S::mul(b, S::add(p[k], v[k])), xx[k]);
    sum = S::add(sum, S::mul(d, d));
  }
  const unsigned lanes = (1u << valid) - 1;
  const unsigned acc = S::bits(S::le(sum, S::mul(rr, rr))) & lanes;
  for (int k = 0; k < N; ++k) m[k] = S::int64_bits(m[k]);
  double* out[L];
  for (int l = 0; l < L; ++l) out[l] = reinterpret_cast<double*>(q + c[l] * n);
  S::template store_rows<N>(m, out, lanes);
  if (V != nullptr) {
    for (int l = 0; l < L; ++l) out[l] = V + c[l] * n;
    S::template store_rows<N>(v, out, lanes);
  }
  for (std::size_t l = 0; l < valid; ++l) H[c[l]] = trial;
  return acc;
}

// The inputs t of the S::L sub-vectors c[l] (columns).
template <class S, int N>
inline void load_inputs(const double* t, const std::size_t* c, typename S::D* tt) {
  constexpr int L = S::L;
  const double* trow[L];
  for (int l = 0; l < L; ++l) trow[l] = t + c[l] * static_cast<std::size_t>(N);
  S::template load_cols<N>(trow, tt);
}

// Whether every input of every lane is small: |t_k| < 2^46 (beyond, the
// integer conversions would leave the exact range).
template <class S, int N>
inline bool small_inputs(const typename S::D* tt) {
  const typename S::D limit = S::splat(0x1.0p46);
  typename S::M small = S::lt(S::abs(tt[0]), limit);
  for (int k = 1; k < N; ++k) small = S::both(small, S::lt(S::abs(tt[k]), limit));
  return S::bits(small) == (1u << S::L) - 1;
}

// The lanes' sub-vectors of the group at i0 of a trial's list (c = idx[i],
// or i where idx is null; a last partial group padded with copies of its
// last sub-vector) and the number of real ones.
template <class S>
inline std::size_t group_at(std::size_t i0, std::size_t count, const std::size_t* pos,
                            const std::size_t* idx, std::size_t* at, std::size_t* c) {
  constexpr int L = S::L;
  const std::size_t valid = count - i0 < static_cast<std::size_t>(L) ? count - i0 : L;
  const std::size_t last = valid - 1;
  for (int l = 0; l < L; ++l) {
    const std::size_t j = i0 + std::min(static_cast<std::size_t>(l), last);
    at[l] = pos != nullptr ? pos[j] : j;
    c[l] = idx != nullptr ? idx[at[l]] : at[l];
  }
  return valid;
}

// voronoi_trials (lattice/voronoi_kernels.hpp), trial by trial in groups of
// S::L sub-vectors; stops at the first group with an input |t| >= 2^46.
template <class S, class Lat>
inline std::size_t exact_trials(std::uint32_t trial, const std::uint64_t* w,
                                const std::size_t* idx, std::size_t count, const double* t,
                                const double* xs, const double* beta, const double* radius,
                                std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                                std::size_t* nrej) {
  constexpr int N = Lat::N, L = S::L;
  constexpr std::size_t n = static_cast<std::size_t>(N);
  const double* wd = reinterpret_cast<const double*>(w);  // the words' bit patterns
  std::size_t i0 = 0, r = 0;
  for (; i0 < count; i0 += L) {
    std::size_t at[L], c[L];
    const std::size_t valid = group_at<S>(i0, count, nullptr, idx, at, c);
    typename S::D tt[N];
    load_inputs<S, N>(t, c, tt);
    if (!small_inputs<S, N>(tt)) break;
    const double* wrow[L];
    for (int l = 0; l < L; ++l) wrow[l] = wd + at[l] * n;
    const unsigned acc =
        exact_trial<S, Lat>(trial, tt, wrow, c, valid, xs, beta, radius, H, q, V);
    // (rej may be idx: this group's entries are read, later ones untouched.)
    for (std::size_t l = 0; l < valid; ++l) {
      rej[r] = c[l];
      r += ((acc >> l) & 1u) ^ 1u;
    }
  }
  *nrej = r;
  return i0 < count ? i0 : count;
}

// voronoi_trials for a lattice whose trials mostly fail (E8: 3.94 trials a
// sub-vector), with the same results as exact_trials: a screen first finds
// the trials that cannot be accepted, and only the others run the exact
// trial, in groups of S::L gathered from a block of the list.
//
// The screen.  With p = G^T u the trial's point of the parallelepiped and
// v = p - c its dither (c = Q(p), a lattice point), the exact trial finds a
// lattice point P (the closest to the rounded t - v) and accepts when the
// rounded |beta (P + v) - xs| <= r = beta rho.  In real numbers
// |P + v - t| >= dist(t - v, L) = dist(t - p, L) (c is a lattice point), so
// an accepted trial has dist(t - p, L) <= rho + delta, where delta bounds
// what the roundings move: t against xs / beta (t = xs (1 / beta)), v
// against p - c, P + v, the product by beta, the screen's own t - p, and
// rho against r / beta.  Each is a unit or two in the last place (2^-53
// relative) of a number below |t|_max + 4 (P + v is within 2 of t; p, v
// below 4), so together under 2^-49 (|t|_max + 4) in norm over the eight
// coordinates; delta = 2^-44 (4 + sum_k |t_k|) is 32 times that or more.
// The screen computes dist(t - p, L)^2 (distance2; its rounding, and
// rho's, under 2^-45) and lets a trial through where it is at most
// rho^2 + 2^-40 + 3 delta + delta^2 > (rho + delta)^2 (2 rho < 3).  A trial
// it stops is rejected by the exact trial too; the rest (the accepted ones,
// and a fraction of about delta of the others) run it.
template <class S, class Lat>
inline std::size_t screened_trials(std::uint32_t trial, const std::uint64_t* w,
                                   const std::size_t* idx, std::size_t count, const double* t,
                                   const double* xs, const double* beta, const double* radius,
                                   std::uint32_t* H, std::int64_t* q, double* V,
                                   std::size_t* rej, std::size_t* nrej) {
  using D = typename S::D;
  constexpr int N = Lat::N, L = S::L;
  constexpr std::size_t n = static_cast<std::size_t>(N);
  constexpr std::size_t kBlock = 512;  // list entries screened before their exact trials
  const double* wd = reinterpret_cast<const double*>(w);  // the words' bit patterns
  const D rho2 = S::splat(Lat::rho() * Lat::rho() + 0x1.0p-40);
  std::size_t done = 0, r = 0;
  for (std::size_t b0 = 0; b0 < count && done == b0; b0 += kBlock) {
    const std::size_t b1 = count - b0 < kBlock ? count : b0 + kBlock;
    std::size_t cand[kBlock + L];  // list entries that pass the screen, in order
    unsigned char kept[kBlock];    // 1 where the entry's trial is accepted
    std::fill_n(kept, kBlock, static_cast<unsigned char>(0));
    std::size_t ncand = 0;
    for (std::size_t i0 = b0; i0 < b1; i0 += L) {
      std::size_t at[L], c[L];
      const std::size_t valid = group_at<S>(i0, b1, nullptr, idx, at, c);
      D tt[N];
      load_inputs<S, N>(t, c, tt);
      if (!small_inputs<S, N>(tt)) break;
      done = i0 + valid;
      const double* wrow[L];
      for (int l = 0; l < L; ++l) wrow[l] = wd + at[l] * n;
      D wc[N], u[N], p[N], tsum = S::splat(4.0);
      S::template load_cols<N>(wrow, wc);
      for (int k = 0; k < N; ++k) u[k] = S::uniform_co(wc[k]);
      Lat::parallelepiped(u, p);
      for (int k = 0; k < N; ++k) {
        tsum = S::add(tsum, S::abs(tt[k]));
        p[k] = S::sub(tt[k], p[k]);
      }
      const D delta = S::mul(tsum, S::splat(0x1.0p-44));
      const D bound = S::add(rho2, S::mul(delta, S::add(S::splat(3.0), delta)));
      const unsigned pass =
          S::bits(S::le(Lat::distance2(p), bound)) & ((1u << valid) - 1);
      for (int l = 0; l < L; ++l) {  // (past the valid lanes: written, not counted)
        cand[ncand] = i0 + static_cast<std::size_t>(l);
        ncand += (pass >> l) & 1u;
      }
    }
    for (std::size_t k0 = 0; k0 < ncand; k0 += L) {
      std::size_t at[L], c[L];
      const std::size_t valid = group_at<S>(k0, ncand, cand, idx, at, c);
      D tt[N];
      load_inputs<S, N>(t, c, tt);  // (all below 2^46: checked by the screen)
      const double* wrow[L];
      for (int l = 0; l < L; ++l) wrow[l] = wd + at[l] * n;
      const unsigned acc =
          exact_trial<S, Lat>(trial, tt, wrow, c, valid, xs, beta, radius, H, q, V);
      for (std::size_t l = 0; l < valid; ++l) kept[at[l] - b0] = (acc >> l) & 1u;
    }
    // (rej may be idx: every entry of the block has been read.)
    for (std::size_t i = b0; i < done; ++i) {
      rej[r] = idx != nullptr ? idx[i] : i;
      r += kept[i - b0] ^ 1u;
    }
  }
  *nrej = r;
  return done;
}

template <class S, class Lat>
inline std::size_t trials(std::uint32_t trial, const std::uint64_t* w, const std::size_t* idx,
                          std::size_t count, const double* t, const double* xs,
                          const double* beta, const double* radius, std::uint32_t* H,
                          std::int64_t* q, double* V, std::size_t* rej, std::size_t* nrej) {
  if constexpr (Lat::kScreened)
    return screened_trials<S, Lat>(trial, w, idx, count, t, xs, beta, radius, H, q, V, rej,
                                   nrej);
  else
    return exact_trials<S, Lat>(trial, w, idx, count, t, xs, beta, radius, H, q, V, rej, nrej);
}

// The lane code of each root lattice (lattice/registry.hpp's RootLattices),
// over S; void for a root lattice without lane code (its trials and dithers
// run in the scalar code).
template <class S, class Scalar>
struct LanesOf {
  using type = void;
};
template <class S>
struct LanesOf<S, LatticeA2> {
  using type = A2<S>;
};
template <class S>
struct LanesOf<S, LatticeD4> {
  using type = D4<S>;
};
template <class S>
struct LanesOf<S, LatticeE8> {
  using type = E8<S>;
};

// f(Lat{}) for the lane code of the root lattice named by id, or 0 (no
// sub-vector done) for Z^n and a lattice without lane code.
template <class S, class F>
inline std::size_t by_lattice(LatticeId id, F&& f) {
  std::size_t done = 0;
  with_root_lattice(id, [&](auto lattice) {
    using Lanes = typename LanesOf<S, decltype(lattice)>::type;
    if constexpr (!std::is_void_v<Lanes>) done = f(Lanes{});
  });
  return done;
}

// voronoi_trials and voronoi_dither (lattice/voronoi_kernels.hpp) over the
// operations S (the lattice named by id: 0 for Z^n), as each SIMD level's
// entry points call them.
template <class S>
inline std::size_t trials_of(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                             const std::size_t* idx, std::size_t count, const double* t,
                             const double* xs, const double* beta, const double* radius,
                             std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                             std::size_t* nrej) {
  return by_lattice<S>(id, [&](auto lat) {
    return trials<S, decltype(lat)>(trial, w, idx, count, t, xs, beta, radius, H, q, V, rej,
                                    nrej);
  });
}
template <class S>
inline std::size_t dithers_of(LatticeId id, const std::uint64_t* w, std::size_t count,
                              double* v) {
  return by_lattice<S>(id, [&](auto lat) { return dithers<S, decltype(lat)>(w, count, v); });
}

}  // namespace cepam::kernels::lanes
