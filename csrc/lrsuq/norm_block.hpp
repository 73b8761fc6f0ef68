// The clip's sum of squares by blocks (payload format version 5, written
// once for the CPU and a GPU: CEPAM_HD, common/host_device.hpp): x cut into
// blocks of kSquaresBlock elements (the last one may be shorter); within
// a block four accumulators, element i of the block into accumulator
// i mod 4 in index order (the elements after the last multiple of four into
// accumulator 0) and the block's sum (a0 + a1) + (a2 + a3); the block sums
// added by a fixed pairwise tree in block order (adjacent pairs, level by
// level, an odd last value going up as it is).  The largest magnitude
// comes with each block (|v| > mx ? |v| : mx), for the caller's rescaled
// second pass when the squares overflow or underflow.
//
// The CPU's lrsuq/norm.cpp runs these functions (its AVX2 lanes are these
// accumulators, the same bits); the CUDA kernel (cuda/norm_gpu.cu) runs one accumulator a
// thread by lane(), then block_total(), and the host adds the block sums by
// tree_sum(): tests/core/test_norm.py checks the host twin against a
// reference of the definition.
#pragma once

#include <cmath>
#include <cstddef>

#include "common/host_device.hpp"

namespace cepam::squares {

inline constexpr std::size_t kSquaresBlock = std::size_t{1} << 16;
inline constexpr int kLanes = 4;

// Accumulator l (0 <= l < 4) of the block x[0..count): the squares of
// x[l], x[l + 4], ... up to the last whole group of four, in index order,
// from 0; and their largest magnitude.
template <class T>
CEPAM_HD inline void lane(const T* x, std::size_t count, int l, double* sum, double* maxabs) {
  const std::size_t whole = count & ~std::size_t{kLanes - 1};
  double acc = 0.0, mx = 0.0;
  for (std::size_t i = static_cast<std::size_t>(l); i < whole; i += kLanes) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
    mx = std::fabs(v) > mx ? std::fabs(v) : mx;
  }
  *sum = acc;
  *maxabs = mx;
}

// The block's sum and largest magnitude from its four accumulators: the
// elements after the last whole group into accumulator 0, then
// (a0 + a1) + (a2 + a3).
template <class T>
CEPAM_HD inline void block_total(const T* x, std::size_t count, const double* acc,
                                 const double* mx, double* total, double* maxabs) {
  double a0 = acc[0], m = mx[0];
  for (std::size_t i = count & ~std::size_t{kLanes - 1}; i < count; ++i) {
    const double v = static_cast<double>(x[i]);
    a0 += v * v;
    m = std::fabs(v) > m ? std::fabs(v) : m;
  }
  for (int l = 1; l < kLanes; ++l) m = mx[l] > m ? mx[l] : m;
  *total = (a0 + acc[1]) + (acc[2] + acc[3]);
  *maxabs = m;
}

// One block, on one thread.
template <class T>
CEPAM_HD inline void block(const T* x, std::size_t count, double* total, double* maxabs) {
  double acc[kLanes], mx[kLanes];
  for (int l = 0; l < kLanes; ++l) lane(x, count, l, &acc[l], &mx[l]);
  block_total(x, count, acc, mx, total, maxabs);
}

// The number of blocks of m elements.
CEPAM_HD inline std::size_t blocks(std::size_t m) {
  return (m + kSquaresBlock - 1) / kSquaresBlock;
}

// s[0..k) added by the fixed pairwise tree; overwrites s; 0 for k = 0.
CEPAM_HD inline double tree_sum(double* s, std::size_t k) {
  if (k == 0) return 0.0;
  while (k > 1) {
    const std::size_t half = k / 2;
    for (std::size_t j = 0; j < half; ++j) s[j] = s[2 * j] + s[2 * j + 1];
    if (k % 2 == 1) s[half] = s[k - 1];
    k = half + k % 2;
  }
  return s[0];
}

// The first pass over x[0..m): the block sums (sums[blocks(m)]) by block()
// and their tree sum; *maxabs the largest magnitude.  (The host twin of the
// CUDA kernel; a result that is not finite, or is below 2^-900, asks for
// the caller's second pass.)
template <class T>
CEPAM_HD inline double sum_by_blocks(const T* x, std::size_t m, double* sums, double* maxabs) {
  const std::size_t k = blocks(m);
  double mx = 0.0;
  for (std::size_t b = 0; b < k; ++b) {
    const std::size_t lo = b * kSquaresBlock;
    const std::size_t count = m - lo < kSquaresBlock ? m - lo : kSquaresBlock;
    double bm = 0.0;
    block(x + lo, count, &sums[b], &bm);
    mx = bm > mx ? bm : mx;
  }
  *maxabs = mx;
  return tree_sum(sums, k);
}

}  // namespace cepam::squares
