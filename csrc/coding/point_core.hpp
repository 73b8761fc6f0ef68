// The point model's per-sub-vector arithmetic (coding/point_coder.hpp
// documents the model) written once for the CPU and a GPU (CEPAM_HD,
// common/host_device.hpp): plain inline functions on caller-provided
// buffers, no allocation, no exception, no virtual call.  A sub-vector's
// frame (sp^2, R^2 and the centre t, or no table), a candidate's ball
// probability, the table's frequencies, a point's symbol, and the D4 and
// E8 walk's coset tables and a level's run of values are these functions
// in PointCoder, so the CPU's bytes are this code's bytes.  (The
// candidates' enumeration itself is still PointCoder's alone.)
//
// Device code needs --fmad=false (CMakeLists.txt), as symbol_core.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "coding/rans_core.hpp"
#include "common/host_device.hpp"
#include "random/detmath.hpp"

// Unrolls the window's loop (common/cpu.hpp's CEPAM_UNROLL(5), which nvcc
// does not know).
#if defined(__CUDACC__)
#define CEPAM_POINT_UNROLL5 _Pragma("unroll 5")
#elif defined(__GNUC__)
#define CEPAM_POINT_UNROLL5 _Pragma("GCC unroll 5")
#else
#define CEPAM_POINT_UNROLL5
#endif

namespace cepam {

inline constexpr std::uint32_t kPointEscapeFreq = kProbScale >> 12;        // PointCoder::kEscapeFreq
inline constexpr std::uint32_t kPointSlots = kProbScale - kPointEscapeFreq;  // S: the escape's start
inline constexpr double kPointTail = 1.0;    // R = rho + sp (sqrt(n) + kPointTail)
inline constexpr double kPointMaxT = 0x1.0p40;  // |t_k| above this: no table

// The model of a sub-vector with scale beta and dither v[n]: rho^2, sp^2
// and R^2 in lattice units.
struct PointFrame {
  double rho2, sp2, r2;
};

// What a sub-vector's frame depends on besides beta and v: the dimension
// n, the packing radius rho, the source model's moments mu and var, the
// largest radius r_cap and sqrt(n); usable = 0 where the model has no
// table at all (moments not finite, or no point model).
struct PointBounds {
  int usable;
  int n;
  double rho, mu, var, r_cap, root_n;
};

// The frame of a sub-vector and its centre t[n] = mu / beta - v; false
// when it has no table (not usable, beta not positive, sp > rho, R above
// r_cap, or some |t_k| not below 2^40; t is then partly written).
CEPAM_HD inline bool point_frame(const PointBounds& b, double beta, const double* v, double* t,
                                 PointFrame* f) {
  if (b.usable == 0 || !(beta > 0.0)) return false;
  const double rho2 = b.rho * b.rho;
  // sp^2 at least rho^2 2^-60 (a constant source): the model stays finite.
  double sp2 = b.var / (beta * beta);
  if (!(sp2 >= rho2 * 0x1.0p-60)) sp2 = rho2 * 0x1.0p-60;
  // Where the source spreads over more than the cell (sp > rho) the box
  // model is as good: no table.
  if (!(sp2 <= rho2)) return false;
  const double r = b.rho + std::sqrt(sp2) * (b.root_n + kPointTail);
  if (!(r <= b.r_cap)) return false;
  const double centre = b.mu / beta;
  for (int k = 0; k < b.n; ++k) {
    t[k] = centre - v[k];
    if (!(std::fabs(t[k]) < kPointMaxT)) return false;
  }
  f->rho2 = rho2;
  f->sp2 = sp2;
  f->r2 = r * r;
  return true;
}

// Whether a sub-vector (scale beta, dither v[n], n <= 8) has a frame, the
// first condition of its having a table: where none has, the point model
// leaves a segment's stream the box model's.
CEPAM_HD inline bool point_framed(const PointBounds& b, double beta, const double* v) {
  double t[8];
  PointFrame f;
  return point_frame(b, beta, v, t, &f);
}

// P(chi'^2_n(lambda) <= x) with x = rho^2 / sp^2 and lambda = d2 / sp^2, by
// Sankaran's (1963) normal approximation of (chi'^2 / (n + lambda))^h:
//   h = 1 - 2/3 (n + lambda)(n + 3 lambda) / (n + 2 lambda)^2,
//   p = (n + 2 lambda) / (n + lambda)^2,  m = (h - 1)(1 - 3 h),
//   z = ((x / (n + lambda))^h - 1 - h p (h - 1 - (2 - h) m p / 2))
//       / (h sqrt(2 p) (1 + m p / 2)),
// written with q_i = n sp^2 + i d2 so that nothing overflows when sp is
// small.  (The CPU's AVX2 form, point_coder.cpp, mirrors it.)
CEPAM_HD inline double point_ball_probability(double n, double rho2, double sp2, double d2) {
  const double q1 = n * sp2 + d2, q2 = q1 + d2, q3 = q2 + d2;
  const double h = 1.0 - (2.0 / 3.0) * (q1 * q3) / (q2 * q2);  // in [1/3, 1/2]
  const double p = q2 * sp2 / (q1 * q1);
  const double m = (h - 1.0) * (1.0 - 3.0 * h);
  const double power = detmath::exp_bounded(h * detmath::log(rho2 / q1));
  const double z = (power - (1.0 + h * p * (h - 1.0 - 0.5 * (2.0 - h) * m * p))) /
                   (h * std::sqrt(2.0 * p) * (1.0 + 0.5 * m * p));
  // Beyond 6 standard deviations the probability is below the coder's
  // resolution (2^-24): not worth computing.
  if (!(z > -6.0)) return 0.0;
  if (z > 6.0) return 1.0;
  return detmath::normal_cdf(z);
}

// The table of count >= 1 candidates from their probabilities p[count]
// (point_ball_probability of their squared distances; not read when count
// is 1): freq[count] and cum[count + 1].  Point i gets 1 + floor(P_i (S -
// 2K) / sum P) and the first most probable point the rest up to S; all P_i
// zero give a uniform table (p is then overwritten with ones).
CEPAM_HD inline void point_frequencies(double* p, std::size_t count, std::uint32_t* freq,
                                       std::uint32_t* cum) {
  cum[0] = 0;
  if (count == 1) {
    // One candidate: the rule below gives it 1 + floor(P_0 scale) and then
    // the rest up to S, so S whatever P_0 is.
    freq[0] = kPointSlots;
    cum[1] = kPointSlots;
    return;
  }
  double total = 0.0;
  for (std::size_t i = 0; i < count; ++i) total += p[i];
  if (!(total > 0.0)) {  // every P_i underflowed: a uniform table
    for (std::size_t i = 0; i < count; ++i) p[i] = 1.0;
    total = static_cast<double>(count);
  }
  // 1 + floor(P_i scale) sums to at most S - K + K rounding slack; the
  // rest goes to the first most probable candidate, so that the table ends
  // at S exactly.
  const std::uint32_t k = static_cast<std::uint32_t>(count);
  const double scale = static_cast<double>(kPointSlots - 2 * k) / total;
  std::size_t best = 0;
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    freq[i] = 1 + static_cast<std::uint32_t>(p[i] * scale);
    sum += freq[i];
    if (p[i] > p[best]) best = i;
  }
  freq[best] += kPointSlots - sum;
  for (std::size_t i = 0; i < count; ++i) cum[i + 1] = cum[i] + freq[i];
}

// The symbol of candidate i of count (start and frequency in the table
// cum[count + 1]), or the escape for i = count; true for a candidate.
CEPAM_HD inline bool point_symbol(std::size_t i, std::size_t count, const std::uint32_t* cum,
                                  std::uint32_t* start, std::uint32_t* freq) {
  if (i == count) {
    *start = kPointSlots;
    *freq = kPointEscapeFreq;
    return false;
  }
  *start = cum[i];
  *freq = cum[i + 1] - cum[i];
  return true;
}

// The D4 and E8 walk's tables (PointCoder::walk, point_coder.cpp documents
// it) for a coset of D8 in E8 (x in Z^n or (Z + 1/2)^n; D4 has only the
// first): the bounds of the levels below, and at each level k < n-1 the
// window of the values x_k that can be within R (kPointWindow<N> on each
// side of the nearest) with their squared terms (x_k - t_k)^2.
template <int N>
inline constexpr int kPointWindow = N == 8 ? 1 : 2;
// The most terms of the offset with G_ik != 0 at a level: 2 for E8, 3 for D4.
template <int N>
inline constexpr int kPointTerms = N == 8 ? 2 : 3;
inline constexpr int kPointMaxWindow = 5;
inline constexpr double kPointBoundShrink = 1.0 - 0x1.0p-30;
static_assert(2 * kPointWindow<4> + 1 <= kPointMaxWindow && 2 * kPointWindow<8> + 1 <= kPointMaxWindow,
              "PointCoset holds the windows");

struct PointCoset {
  double bound[8];  // the bounds of the levels below, times kPointBoundShrink
  double x[kPointMaxWindow][8];
  double sq[kPointMaxWindow][8];
  double side[8];  // the least sq[w][k] but the centre's (w = kPointWindow<N>)
};

// A coset's bounds, from d2[k] = the squared distance of t_k to the
// nearest point of Z + h (h = 0, or 1/2 for E8's second coset): bound[k] =
// below_k kPointBoundShrink, below_k = the sum of d2[i] over the levels i <
// k, computed with relative errors of a few units in 2^-53, which
// kPointBoundShrink covers.  Each level's term of a candidate's distance is
// at least its d2, so a subtree whose partial sum plus below exceeds R^2
// holds no candidate.  (The windows are filled by point_fill_cosets and
// the CPU's AVX2 form of it.)
template <int N>
CEPAM_HD inline void point_set_bounds(const double* d2, PointCoset& s) {
  double below = 0.0;
  s.bound[0] = 0.0;
  for (int k = 0; k + 1 < N; ++k) {
    below += d2[k];
    s.bound[k + 1] = below * kPointBoundShrink;
  }
}

// The cosets' tables (one for D4, N = 4; two for E8, N = 8) around t[N].
// The floor is r - (r > c), r = (c + 1.5 2^52) - 1.5 2^52 the nearest
// integer to c (exact for |c| < 2^51; c = u + 1/2 is never -0, so no floor
// gives -0).
template <int N>
CEPAM_HD inline void point_fill_cosets(const double* __restrict t, PointCoset* __restrict s) {
  constexpr int W = kPointWindow<N>;
  constexpr int kCosets = N == 8 ? 2 : 1;
  constexpr double kRound = 0x1.8p52;
  for (int c = 0; c < kCosets; ++c) {
    const double h = 0.5 * static_cast<double>(c);
    double d2[N];
    for (int k = 0; k < N; ++k) {
      const double u = t[k] - h;
      const double centre = u + 0.5;
      const double r = (centre + kRound) - kRound;
      const double n0 = r - (r > centre ? 1.0 : 0.0);  // floor(centre)
      const double d = u - n0;
      d2[k] = d * d;
      CEPAM_POINT_UNROLL5
      for (int w = 0; w <= 2 * W; ++w) {
        const double x = (n0 + static_cast<double>(w - W)) + h;  // exact
        const double e = x - t[k];
        s[c].x[w][k] = x;
        s[c].sq[w][k] = e * e;
      }
      double side = s[c].sq[0][k];
      for (int w = 1; w <= 2 * W; ++w)
        if (w != W && s[c].sq[w][k] < side) side = s[c].sq[w][k];
      s[c].side[k] = side;
    }
    point_set_bounds<N>(d2, s[c]);
  }
}

// The run [lo, hi] of the values j with valid(j) (a convex set: the j
// within the radius) around j0 = floor(centre) (|centre| < 2^52), found
// from j0, j0 - 1 or j0 + 1; false when none of those is valid.
template <class Valid>
CEPAM_HD inline bool point_valid_run(double centre, Valid&& valid, std::int64_t& lo,
                                     std::int64_t& hi) {
  std::int64_t j0 = static_cast<std::int64_t>(centre);
  j0 -= centre < static_cast<double>(j0) ? 1 : 0;
  lo = j0;
  if (!valid(lo)) {
    if (valid(j0 - 1)) lo = j0 - 1;
    else if (valid(j0 + 1)) lo = j0 + 1;
    else return false;
  }
  hi = lo;
  while (valid(lo - 1)) --lo;
  while (valid(hi + 1)) ++hi;
  return true;
}

}  // namespace cepam
