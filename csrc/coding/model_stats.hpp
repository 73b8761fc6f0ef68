// The statistics of the data that the entropy coder's source model is
// fitted to (coding/source_model.hpp), written once for the CPU and a GPU
// (CEPAM_HD, common/host_device.hpp): the largest magnitude of x, the
// model's range A from it, and the grid cell of each x factor.  The model is
// a function of m, A and the per-cell integer counts only
// (SourceModel::fit_from), so any order of the passes (threads, CUDA
// blocks, integer atomics) gives the same model.
//
// The CPU's SourceModel::fit runs these functions; the CUDA kernels
// (cuda/model_gpu.cu) run them one element a thread; the host twin of the
// kernels (model_statistics) runs them a chunk at a time, and
// tests/core/test_model_stats.py checks the model bytes fitted from the
// twin's statistics against the CPU's fit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/host_device.hpp"

namespace cepam::model_stats {

// The evaluation grid on [-A, A] (SourceModel::kCells).
inline constexpr int kCells = 1024;

// The largest of |v| and mx, a NaN v skipped (mx is never NaN).
template <class T>
CEPAM_HD inline T abs_max(T v, T mx) {
  const T a = std::fabs(v);
  return a > mx ? a : mx;
}

// max |x[i]| over i < m, NaN skipped, 0 for m = 0: eight partial maxima
// (the CPU's vectorised loop; the maximum does not depend on the order).
template <class T>
CEPAM_HD inline T max_abs(const T* x, std::size_t m) {
  T part[8] = {};
  std::size_t i8 = 0;
  for (; i8 + 8 <= m; i8 += 8)
    for (std::size_t l = 0; l < 8; ++l) part[l] = abs_max(x[i8 + l], part[l]);
  for (; i8 < m; ++i8) part[0] = abs_max(x[i8], part[0]);
  T xmax = 0;
  for (const T v : part) xmax = v > xmax ? v : xmax;
  return xmax;
}

// The model's range A from the largest magnitude xmax of x and the factor
// (max |x factor| = (max |x|) factor, rounding being monotone): 2A and
// kCells / 2A must be finite, so A is clamped to [2^-1000, 2^1020]; 1 for
// no data or zeros (values beyond a clamped range fall in the end cells,
// which only costs bits).
CEPAM_HD inline double range(double xmax, double factor) {
  constexpr double kMaxRange = 0x1.0p1020;
  constexpr double kMinRange = 0x1.0p-1000;
  const double a = xmax * factor;
  return a > 0.0 ? (a < kMaxRange ? (a > kMinRange ? a : kMinRange) : kMaxRange) : 1.0;
}

// kCells / 2A: the cells per unit of x factor.
CEPAM_HD inline double inv_width(double a) { return static_cast<double>(kCells) / (2.0 * a); }

// The grid cell of v factor in a model of range a: floor(u) clamped to
// [0, kCells - 1], u = (v factor + a) inv_width, clamped in the
// floating-point domain (so that a NaN u, from non-finite data that LRSUQ
// will reject, gets some cell without undefined behaviour).
template <class T>
CEPAM_HD inline std::int32_t cell(T v, double factor, double a, double inv_width) {
  const double u = (static_cast<double>(v) * factor + a) * inv_width;
  const double c = u < kCells - 1 ? u : kCells - 1;
  return static_cast<std::int32_t>(c >= 1.0 ? c : 0.0);
}

// The host twin of the CUDA kernels (cuda/model_gpu.cu): their functions
// one element at a time in index order: the largest magnitude (abs_max,
// which also combines the threads' maxima on the device), the range, then
// counts[cell]++ (kCells counts, added to).  Returns the range.
template <class T>
inline double by_elements(const T* x, std::size_t m, double factor, std::uint64_t* counts) {
  T mx = 0;
  for (std::size_t i = 0; i < m; ++i) mx = abs_max(x[i], mx);
  const double a = range(static_cast<double>(mx), factor), w = inv_width(a);
  for (std::size_t i = 0; i < m; ++i) ++counts[cell(x[i], factor, a, w)];
  return a;
}

}  // namespace cepam::model_stats
