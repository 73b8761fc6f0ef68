// The point model's per-sub-vector arithmetic (coding/point_coder.hpp
// documents the model) written once for the CPU and a GPU (CEPAM_HD,
// common/host_device.hpp): plain inline functions on caller-provided
// buffers, no allocation, no exception, no virtual call.  A sub-vector's
// frame (sp^2, R^2 and the centre t, or no table), a candidate's ball
// probability, the table's frequencies and a point's symbol are these
// functions in PointCoder, so the CPU's bytes are this code's bytes.  (The
// candidates' enumeration is still PointCoder's alone.)
//
// Device code needs --fmad=false (CMakeLists.txt), as symbol_core.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "coding/rans_core.hpp"
#include "common/host_device.hpp"
#include "random/detmath.hpp"

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

// The frame of a sub-vector and its centre t[n] = mu / beta - v; false when
// it has no table (beta not positive, sp > rho, R above r_cap, or some
// |t_k| not below 2^40; t is then partly written).  mu and var are the
// source model's moments (finite), rho the packing radius, root_n sqrt(n).
CEPAM_HD inline bool point_frame(int n, double rho, double mu, double var, double r_cap,
                                 double root_n, double beta, const double* v, double* t,
                                 PointFrame* f) {
  if (!(beta > 0.0)) return false;
  const double rho2 = rho * rho;
  // sp^2 at least rho^2 2^-60 (a constant source): the model stays finite.
  double sp2 = var / (beta * beta);
  if (!(sp2 >= rho2 * 0x1.0p-60)) sp2 = rho2 * 0x1.0p-60;
  // Where the source spreads over more than the cell (sp > rho) the box
  // model is as good: no table.
  if (!(sp2 <= rho2)) return false;
  const double r = rho + std::sqrt(sp2) * (root_n + kPointTail);
  if (!(r <= r_cap)) return false;
  const double centre = mu / beta;
  for (int k = 0; k < n; ++k) {
    t[k] = centre - v[k];
    if (!(std::fabs(t[k]) < kPointMaxT)) return false;
  }
  f->rho2 = rho2;
  f->sp2 = sp2;
  f->r2 = r * r;
  return true;
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

}  // namespace cepam
