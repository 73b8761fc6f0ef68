// The kernels of the integer lattice Z^n, cell [-1/2, 1/2)^n.
//
// Per coordinate (CEPAM_HD: host and CUDA devices) and as element-wise
// batches over the flat arrays of a chunk of sub-vectors (element e =
// coordinate k of sub-vector c, e = c n + k, the sub-vector's scale beta
// repeated for each of its coordinates).  The batch forms' SIMD paths
// (lattice/zn_lanes.hpp: AVX-512, AVX2 or NEON, chosen at run time, see
// common/cpu.hpp) apply the per-coordinate formulas 8, 4 or 2 elements at
// a time with the same IEEE operations in the same order, so the results
// are the same bits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"
#include "random/chacha20.hpp"

namespace cepam {

// Rounds to the nearest integer, halves up; exact for |t| < 2^52.
CEPAM_HD inline double round_half_up(double t) {
  const double f = std::floor(t);
  return (t - f >= 0.5) ? f + 1.0 : f;
}

}  // namespace cepam

namespace cepam::kernels {

// One coordinate: the dither v = uniform_co(w) - 1/2 of the cell, and one
// trial: f = round_half_up(t - v) (returned; |f| < 2^51 so it converts
// exactly) and, unless dev is null (a cell that is the ball accepts every
// trial), the coordinate's term of the acceptance test,
// d = beta (f + v) - xs, *dev = d^2 (l2) or |d| (l1).
CEPAM_HD inline double zn_dither(std::uint64_t w) { return uniform_co(w) - 0.5; }

CEPAM_HD inline double zn_trial(double t, double xs, double beta, std::uint64_t w, bool l2,
                                double* dev) {
  const double v = uniform_co(w) - 0.5;
  const double f = round_half_up(t - v);
  if (dev != nullptr) {
    const double d = beta * (f + v) - xs;
    *dev = l2 ? d * d : std::fabs(d);
  }
  return f;
}

// One trial for elements e < count:
//   v = uniform_co(w[e]) - 0.5;  f = round_half_up(t[e] - v);  q[e] = f;
// and, unless dev is null (a cell that is the ball accepts every trial),
//   d = beta[e] * (f + v) - xs[e];  dev[e] = d * d (l2_norm) or |d| (l1);
// and, unless v_out is null, v_out[e] = v (zn_dither's, in the same pass).
void zn_trial(const double* t, const double* xs, const double* beta, const std::uint64_t* w,
              std::size_t count, bool l2_norm, std::int64_t* q, double* dev,
              double* v_out = nullptr);

// The dither per element: v[e] = uniform_co(w[e]) - 0.5.
void zn_dither(const std::uint64_t* w, std::size_t count, double* v);

// y[e] = T(beta[e] * (double(q[e]) + v[e])), |q[e]| <= 2^53.
template <class T>
void zn_reconstruct(const std::int64_t* q, const double* v, const double* beta, std::size_t count,
                    T* y);

namespace avx512 {
// The AVX-512 forms (lattice/zn_kernels_avx512.cpp), for CPUs with AVX-512
// F, DQ and VL (simd_avx512dq()): each does the whole groups of eight
// elements of its batch form and returns how many it did.
std::size_t zn_trial(const double* t, const double* xs, const double* beta,
                     const std::uint64_t* w, std::size_t count, bool l2_norm, std::int64_t* q,
                     double* dev, double* v_out);
std::size_t zn_dither(const std::uint64_t* w, std::size_t count, double* v);
template <class T>
std::size_t zn_reconstruct(const std::int64_t* q, const double* v, const double* beta,
                           std::size_t count, T* y);
}  // namespace avx512

}  // namespace cepam::kernels
