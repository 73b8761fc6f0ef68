// A sub-vector's point-model table (coding/point_coder.hpp documents the
// model) written once for the CPU and a GPU (CEPAM_HD): the candidates'
// enumeration over the lower-triangular basis (Fincke and Pohst; D4 and E8
// walked in the coordinates x = G^T m: the same points in the same order,
// as the comment before point_walk says), their probabilities and
// frequencies (coding/point_core.hpp), and a point's place among them.
// PointCoder runs these functions, so the CPU's bytes are this code's
// bytes; a GPU's symbol kernel runs them for the point model's streams.
//
// Plain inline functions on a caller's PointTable (about 7 KiB), no
// allocation, no exception.  Device code needs --fmad=false
// (CMakeLists.txt), as point_core.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/point_core.hpp"
#include "common/host_device.hpp"

namespace cepam {

inline constexpr std::size_t kPointMaxCandidates = 64;  // PointCoder::kMaxCandidates
static_assert(kPointMaxCandidates % 4 == 0, "d2 has room for a last group of four");

// The basis as the enumeration reads it (built once, point_basis): G (row
// i, column k: b[i n + k]), 1 / G_kk where G_kk is a power of two (else
// 0), each level's terms (the rows i > k with G_ik != 0, in order) and, for
// the walk (walked = 4 for D4, 8 for E8, else 0), those rows padded to
// kPointTerms (row n: m_n = 0) with their G_ik (0 for the padding).
struct PointBasis {
  int n;
  int walked;
  double b[64];
  double inv_g[8];
  int terms[8];
  int term_row[8][8];
  int pad_row[8][3];
  double pad_g[8][3];
};

// A sub-vector's table: its centre t and R^2, the candidates (count of
// them; x = G^T m where walked, else m), their squared distances and then
// probabilities (d2, with room for a last group of four), frequencies and
// cumulative frequencies (cum[count + 1]); and the enumeration's state.
struct PointTable {
  double t[8];
  double r2;
  std::size_t count;
  bool overflow;
  std::int64_t cur[8];
  double x[8];
  PointCoset coset[2];
  union {
    double x[kPointMaxCandidates * 8];
    std::int64_t m[kPointMaxCandidates * 8];
  } cand;
  double d2[kPointMaxCandidates];
  std::uint32_t freq[kPointMaxCandidates];
  std::uint32_t cum[kPointMaxCandidates + 1];
};

// The candidates m_k at level K, given T.cur[i] for i > K: those whose
// partial sums stay within R^2.  e = (off + j G_KK) - t_K is non-decreasing
// in j (every rounding is monotone), so the partial sum is quasi-convex in
// j: the valid j form an interval around the minimum, which is at j0 - 1,
// j0 or j0 + 1 for j0 the nearest integer to the centre.  off is the sum
// of the terms m_i G_iK whose G_iK is not zero, in order of i (a zero term
// can only change the sign of a zero sum, which neither the squared
// distance nor the centre's floor sees).
template <int N, int K>
CEPAM_HD inline void point_enumerate(const PointBasis& B, PointTable& T, double partial) {
  const double* b = B.b;
  const double g = b[K * N + K];
  double off = 0.0;
  for (int t = 0; t < B.terms[K]; ++t)
    off += static_cast<double>(T.cur[B.term_row[K][t]]) * b[B.term_row[K][t] * N + K];
  const double tk = T.t[K];
  const double r2 = T.r2;
  const auto distance = [&](std::int64_t j) {
    const double e = (off + static_cast<double>(j) * g) - tk;
    return partial + e * e;
  };
  const auto valid = [&](std::int64_t j) { return distance(j) <= r2; };
  // j0 = floor((t_K - off) / g + 1/2): by truncation (exact, |t| < 2^40),
  // and by a multiplication where 1 / g is a power of two (the same value
  // as the division then).
  const double centre = (B.inv_g[K] != 0.0 ? (tk - off) * B.inv_g[K] : (tk - off) / g) + 0.5;
  std::int64_t lo, hi;
  if (!point_valid_run(centre, valid, lo, hi)) return;
  for (std::int64_t j = lo; j <= hi && !T.overflow; ++j) {
    T.cur[K] = j;
    const double p = distance(j);
    if constexpr (K > 0) {
      point_enumerate<N, K - 1>(B, T, p);
    } else if (T.count == kPointMaxCandidates) {
      T.overflow = true;
    } else {
      std::int64_t* to = T.cand.m + T.count * N;
      for (int i = 0; i < N; ++i) to[i] = T.cur[i];  // (N fixed: moves inline)
      T.d2[T.count++] = p;
    }
  }
}

// D4 and E8, walked in the coordinates x = G^T m.
//
// The walk finds the candidates that point_enumerate finds, in the same order,
// with the same distances (D4 and E8 used enumerate until the walk, pruned
// with the bounds below, which the walk applies to the same nodes with the
// same values).  Level k steps through x_k itself instead of m_k: a point
// of D4 or E8 has x_{n-1} in g Z (g = G_{n-1,n-1} = 1 or 1/2), all of
// x_0 .. x_{n-2} in Z + h, h = the fractional part of x_{n-1} (the coset),
// and sum_k (x_k - h) even.  So below the top each level's terms depend on
// the coset alone: they are tabulated once per sub-vector (point_fill_cosets),
// and the last level takes every other value (the parity).
// Why the same:
// - The set.  enumerate's x_k = offset + m_k G_kk is exact (halves of
//   integers below 2^42), so its term e = x_k - t_k, its partial sums and
//   its set (the points whose partial sums all stay within R^2; the last
//   sum is the largest, as adding a non-negative term never decreases a
//   rounded sum) are functions of x alone: the walk computes the same e.
// - The order.  G is lower triangular with a positive diagonal, so for
//   fixed m_i (i > k), x_k increases with m_k: enumerate's order
//   (lexicographic in m_{n-1}, .., m_0) is the lexicographic order of
//   (x_{n-1}, .., x_0), the walk's.
// - The windows.  A value x_k = n + h within R has |fl(x_k - t_k)| <= R
//   (1 + 2^-51), and the window's centre n0 = floor(fl(t_k - h) + 1/2) is
//   within 1/2 + 2^-11 of t_k - h (|t_k| < 2^40), so |n - n0| < R + 1/2 +
//   2^-10 <= kWindow + 1 (checked for r_cap in the constructor): every
//   value within R is in the window, whose values are tested one by one.
// - The pruning.  enumerate kept j when p(j) <= R^2 and (level > 0) p(j) +
//   below_k kBoundShrink <= R^2, the walk tests the same sums (the second
//   test implies the first).  below_k depends on h alone.
// - The candidates.  x and m determine each other, exactly (point_to_x, point_solve):
//   every offset is a sum of halves of integers below 2^42 and every
//   1 / G_kk a power of two; so the walk keeps x, and m is solved for
//   when it is needed (point_find, point_candidate).

// Level K < N-1 of the D4 and E8 walk: x_K in the window of coset s; sum =
// the sum of x_i, i > K.  False when the candidates overflow.
template <int N, int K>
CEPAM_HD inline bool point_walk(PointTable& T, double partial, const PointCoset& s, double sum) {
  constexpr int W = kPointWindow<N>;
  const double r2 = T.r2;
  if constexpr (K > 0) {
    const double bound = s.bound[K];
    // Rounding is monotone, so where the least term off the centre fails
    // the test every value off the centre does: only the centre is tried.
    if (!((partial + s.side[K]) + bound <= r2)) {
      const double p = partial + s.sq[W][K];
      if (!(p + bound <= r2)) return true;
      T.x[K] = s.x[W][K];
      return point_walk<N, K - 1>(T, p, s, sum + T.x[K]);
    }
    for (int w = 0; w <= 2 * W; ++w) {
      const double p = partial + s.sq[w][K];
      if (!(p + bound <= r2)) continue;
      T.x[K] = s.x[w][K];
      if (!point_walk<N, K - 1>(T, p, s, sum + T.x[K])) return false;
    }
  } else {
    // x_0 makes the sum of the x_k even (of the n_k = x_k - h, as there
    // are 4 or 8 of them); the window's values alternate in parity.
    const double first = sum + s.x[0][0];  // an integer below 2^46: exact
    for (int w = static_cast<int>(static_cast<std::int64_t>(first) & 1); w <= 2 * W; w += 2) {
      const double p = partial + s.sq[w][0];
      if (!(p <= r2)) continue;
      if (T.count == kPointMaxCandidates) {
        T.overflow = true;
        return false;
      }
      T.x[0] = s.x[w][0];
      double* to = T.cand.x + T.count * N;
      for (int i = 0; i < N; ++i) to[i] = T.x[i];  // (N fixed: moves inline)
      T.d2[T.count++] = p;
    }
  }
  return true;
}

// The top level of the walk (no offset there): x_K = j G_KK, the cosets'
// tables filled by fill(t, coset) (point_fill_cosets<N>, or the CPU's
// SIMD form of it) once the top has a value.
template <int N, class Fill>
CEPAM_HD inline void point_walk_top(const PointBasis& B, PointTable& T, Fill&& fill) {
  constexpr int K = N - 1;
  const double g = B.b[K * N + K];  // 1 (D4) or 1/2 (E8)
  const double tk = T.t[K];
  const double r2 = T.r2;
  const auto distance = [&](std::int64_t j) {
    const double e = (0.0 + static_cast<double>(j) * g) - tk;
    return 0.0 + e * e;
  };
  const auto valid = [&](std::int64_t j) { return distance(j) <= r2; };
  const double centre = tk * B.inv_g[K] + 0.5;
  std::int64_t lo, hi;
  if (!point_valid_run(centre, valid, lo, hi)) return;
  fill(T.t, T.coset);
  for (std::int64_t j = lo; j <= hi; ++j) {
    // x_K = j g: coset 1 (h = 1/2) of E8 when j is odd.
    const PointCoset& s = T.coset[N == 8 ? (j & 1) : 0];
    const double p = distance(j);
    // No point below can come within R: the subtree has no candidate.
    if (p + s.bound[K] > r2) continue;
    T.x[K] = static_cast<double>(j) * g;
    if (!point_walk<N, K - 1>(T, p, s, T.x[K])) return;
  }
}

// The candidates of a sub-vector whose frame is set (T.t, T.r2): into
// T.cand and T.d2 (their squared distances), T.count of them, T.overflow
// when there are more than kPointMaxCandidates.  fill(n, t, coset) fills
// the walk's cosets for n = 4 or 8.
template <class Fill>
CEPAM_HD inline void point_candidates(const PointBasis& B, PointTable& T, Fill&& fill) {
  T.count = 0;
  T.overflow = false;
  const auto fill_n = [&](int n) {
    return [&fill, n](const double* t, PointCoset* s) { fill(n, t, s); };
  };
  switch (B.walked != 0 ? 8 + B.walked : B.n) {
    case 12: return point_walk_top<4>(B, T, fill_n(4));
    case 16: return point_walk_top<8>(B, T, fill_n(8));
    case 1: return point_enumerate<1, 0>(B, T, 0.0);
    case 2: return point_enumerate<2, 1>(B, T, 0.0);
    case 3: return point_enumerate<3, 2>(B, T, 0.0);
    case 4: return point_enumerate<4, 3>(B, T, 0.0);
    case 5: return point_enumerate<5, 4>(B, T, 0.0);
    case 6: return point_enumerate<6, 5>(B, T, 0.0);
    case 7: return point_enumerate<7, 6>(B, T, 0.0);
    default: return point_enumerate<8, 7>(B, T, 0.0);
  }
}

// The walk's cosets by point_fill_cosets (fill for point_candidates).
struct PointFillCosets {
  CEPAM_HD void operator()(int n, const double* t, PointCoset* s) const {
    if (n == 8) point_fill_cosets<8>(t, s);
    else point_fill_cosets<4>(t, s);
  }
};

// point_ball_probability for d[0 .. count), in place (ball for
// point_prepare).
struct PointBallProbabilities {
  CEPAM_HD void operator()(double n, double rho2, double sp2, double* d, std::size_t count) const {
    for (std::size_t i = 0; i < count; ++i) d[i] = point_ball_probability(n, rho2, sp2, d[i]);
  }
};

// The table of a sub-vector with scale beta and dither v[n]; false when it
// has none (no frame, no candidate, or more than kPointMaxCandidates):
// the box model codes it.  fill as point_candidates; ball(n, rho2, sp2, d,
// count) turns squared distances into probabilities
// (PointBallProbabilities, or the CPU's SIMD form; d has room for count
// rounded up to a multiple of 4).
template <class Fill, class Ball>
CEPAM_HD inline bool point_prepare(const PointBasis& B, const PointBounds& bounds, double beta,
                                   const double* v, PointTable& T, Fill&& fill, Ball&& ball) {
  PointFrame f;
  if (!point_frame(bounds, beta, v, T.t, &f)) return false;
  T.r2 = f.r2;
  point_candidates(B, T, fill);
  if (T.overflow || T.count == 0) return false;
  // d2 then holds the candidates' probabilities.
  if (T.count > 1) ball(static_cast<double>(B.n), f.rho2, f.sp2, T.d2, T.count);
  point_frequencies(T.d2, T.count, T.freq, T.cum);
  return true;
}

// x = G^T m and m = G^-T x (k = n-1 .. 0) for D4 and E8 (N = n), with the
// terms of the offset whose G_ik is not zero, padded to kPointTerms<N>
// with zeros (every sum is exact, so the order and the zeros do not
// matter): straight-line code.
template <int N>
CEPAM_HD inline void point_to_x(const PointBasis& B, const std::int64_t* m, double* x) {
  double mm[N + 1];
  for (int k = 0; k < N; ++k) mm[k] = static_cast<double>(m[k]);
  mm[N] = 0.0;
  for (int k = 0; k < N; ++k) {
    double s = mm[k] * B.b[k * N + k];
    for (int t = 0; t < kPointTerms<N>; ++t) s += mm[B.pad_row[k][t]] * B.pad_g[k][t];
    x[k] = s;
  }
}

template <int N>
CEPAM_HD inline void point_solve(const PointBasis& B, const double* x, std::int64_t* m) {
  double mm[N + 1];
  mm[N] = 0.0;
  for (int k = N - 1; k >= 0; --k) {
    double off = 0.0;
    for (int t = 0; t < kPointTerms<N>; ++t) off += mm[B.pad_row[k][t]] * B.pad_g[k][t];
    mm[k] = (x[k] - off) * B.inv_g[k];
  }
  for (int k = 0; k < N; ++k) m[k] = static_cast<std::int64_t>(mm[k]);
}

// Candidate i's point m (n coordinates).
CEPAM_HD inline void point_candidate(const PointBasis& B, const PointTable& T, std::size_t i,
                                     std::int64_t* m) {
  const std::size_t n = static_cast<std::size_t>(B.n);
  if (B.walked == 8) return point_solve<8>(B, T.cand.x + i * n, m);
  if (B.walked == 4) return point_solve<4>(B, T.cand.x + i * n, m);
  for (std::size_t k = 0; k < n; ++k) m[k] = T.cand.m[i * n + k];
}

// The candidate that is m, or T.count.  Walked: a candidate's x is exact,
// and so is that of m if m is one (then its x is the first equal one, the x
// of distinct points being distinct).  So is that of any m with every |m_k|
// below 2^40 (halves of integers below 2^44): an equal x is then the same
// point.  An x that equals a candidate's only by rounding (m far away) is
// told apart by solving for the candidate's m.
CEPAM_HD inline std::size_t point_find(const PointBasis& B, const PointTable& T,
                                       const std::int64_t* m) {
  const std::size_t n = static_cast<std::size_t>(B.n);
  if (B.walked == 0) {
    for (std::size_t i = 0; i < T.count; ++i) {
      bool same = true;
      for (std::size_t k = 0; k < n; ++k) same = same && m[k] == T.cand.m[i * n + k];
      if (same) return i;
    }
    return T.count;
  }
  double x[8];
  if (B.walked == 8) point_to_x<8>(B, m, x);
  else point_to_x<4>(B, m, x);
  constexpr std::int64_t kExact = std::int64_t{1} << 40;
  bool exact = true;
  for (std::size_t k = 0; k < n; ++k) exact = exact && m[k] < kExact && m[k] > -kExact;
  for (std::size_t i = 0; i < T.count; ++i) {
    const double* c = T.cand.x + i * n;
    bool same = true;
    for (std::size_t k = 0; k < n; ++k) same = same && x[k] == c[k];
    if (!same) continue;
    if (exact) return i;
    std::int64_t mc[8];
    point_candidate(B, T, i, mc);
    for (std::size_t k = 0; k < n; ++k)
      if (m[k] != mc[k]) return T.count;
    return i;
  }
  return T.count;
}

// Whether m[n] is within R of the table's centre (a candidate, for a table
// that did not overflow: an escaped point must not be), its squared
// distance accumulated for k = n-1 .. 0 with the enumeration's arithmetic
// (sum_{i>k} m_i G_ik in order of i, then the term (off + m_k G_kk) - t_k),
// so that both agree to the bit.
CEPAM_HD inline bool point_listed(const PointBasis& B, const PointTable& T,
                                  const std::int64_t* m) {
  const int n = B.n;
  double partial = 0.0;
  for (int k = n - 1; k >= 0; --k) {
    double off = 0.0;
    for (int i = k + 1; i < n; ++i) off += static_cast<double>(m[i]) * B.b[i * n + k];
    const double e = (off + static_cast<double>(m[k]) * B.b[k * n + k]) - T.t[k];
    partial = partial + e * e;
  }
  return partial <= T.r2;
}

// The candidate whose interval holds slot s (below kPointSlots): the i with
// cum[i] <= s < cum[i + 1], by bisection.
CEPAM_HD inline std::size_t point_index(const PointTable& T, std::uint32_t s) {
  std::size_t lo = 0, hi = T.count;  // cum[lo] <= s < cum[hi]
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (T.cum[mid] <= s) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace cepam
