#include "lrsuq/norm.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "common/cpu.hpp"
#include "common/errors.hpp"
#include "common/parallel.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>
#endif

namespace cepam {
namespace {

// The sum and the largest magnitude of one pass.
struct Squares {
  double total;
  double maxabs;
};

// The tail x[i .. m) after the whole groups of four: into a0 (accumulator
// 0, whose chain it continues) and maxabs.
template <class T>
inline void tail(const T* x, std::size_t i, std::size_t m, double& a0, double& maxabs) {
  for (; i < m; ++i) {
    const double v = static_cast<double>(x[i]);
    a0 += v * v;
    maxabs = std::fabs(v) > maxabs ? std::fabs(v) : maxabs;
  }
}

// SumOrder::Fixed, portable: squares::block, the code a GPU runs.
template <class T>
Squares fixed_portable(const T* x, std::size_t m) {
  Squares s;
  squares::block(x, m, &s.total, &s.maxabs);
  return s;
}

#if CEPAM_X86_DISPATCH
// Four elements as doubles.
CEPAM_TARGET_AVX2 inline __m256d load4(const float* x) { return _mm256_cvtps_pd(_mm_loadu_ps(x)); }
CEPAM_TARGET_AVX2 inline __m256d load4(const double* x) { return _mm256_loadu_pd(x); }

// acc += v v and mx = max(|v|, mx) per lane: lane l takes the scalar code's
// operations of accumulator l (a product, then a sum: no fused multiply-add
// under target("avx2")), and max(|v|, mx) is its `|v| > mx ? |v| : mx`.
CEPAM_TARGET_AVX2 inline void accumulate(__m256d v, __m256d& acc, __m256d& mx) {
  acc = _mm256_add_pd(acc, _mm256_mul_pd(v, v));
  mx = _mm256_max_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), v), mx);
}

CEPAM_TARGET_AVX2 inline double lane(__m256d v, int l) {
  alignas(32) double a[4];
  _mm256_store_pd(a, v);
  return a[l];
}

// SumOrder::Fixed: the four accumulators are the four lanes of one register.
template <class T>
CEPAM_TARGET_AVX2 Squares fixed_avx2(const T* x, std::size_t m) {
  __m256d acc = _mm256_setzero_pd(), mx = _mm256_setzero_pd();
  std::size_t i = 0;
  for (; i + 4 <= m; i += 4) accumulate(load4(x + i), acc, mx);
  double a0 = lane(acc, 0);
  // The maxima of the lanes (no NaN: a NaN makes the total NaN, and the
  // caller then looks for it).
  double maxabs = std::fmax(std::fmax(lane(mx, 0), lane(mx, 1)), std::fmax(lane(mx, 2), lane(mx, 3)));
  tail(x, i, m, a0, maxabs);
  return {(a0 + lane(acc, 1)) + (lane(acc, 2) + lane(acc, 3)), maxabs};
}

// SumOrder::Any: sixteen accumulators, off the latency of one chain of sums.
template <class T>
CEPAM_TARGET_AVX2 Squares any_avx2(const T* x, std::size_t m) {
  __m256d acc[4], mx[4];
  for (int k = 0; k < 4; ++k) acc[k] = mx[k] = _mm256_setzero_pd();
  std::size_t i = 0;
  for (; i + 16 <= m; i += 16)
    for (int k = 0; k < 4; ++k) accumulate(load4(x + i + 4 * k), acc[k], mx[k]);
  const __m256d a = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  const __m256d b = _mm256_max_pd(_mm256_max_pd(mx[0], mx[1]), _mm256_max_pd(mx[2], mx[3]));
  const Squares rest = fixed_portable(x + i, m - i);
  return {((lane(a, 0) + lane(a, 1)) + (lane(a, 2) + lane(a, 3))) + rest.total,
          std::fmax(std::fmax(std::fmax(lane(b, 0), lane(b, 1)), std::fmax(lane(b, 2), lane(b, 3))),
                    rest.maxabs)};
}
#endif

template <class T>
Squares block_squares(const T* x, std::size_t m, SumOrder order) {
#if CEPAM_X86_DISPATCH
  if (simd_level() >= SimdLevel::Avx2) return order == SumOrder::Fixed ? fixed_avx2(x, m) : any_avx2(x, m);
#endif
  (void)order;
  return fixed_portable(x, m);
}

// The number of blocks and the fixed pairwise tree over their sums: those
// of lrsuq/norm_block.hpp, written once for the CPU and a GPU.
using squares::tree_sum;
inline std::size_t block_count(std::size_t m) { return squares::blocks(m); }

// The second pass, for squares that overflow or underflow: per block, the
// first non-finite entry (m if none) and the sum of (x / maxabs)^2 in
// index order (scalar: it is rare, and the same at every SIMD level); the
// blocks' sums by tree_sum.  Throws InvalidArgument naming the first
// non-finite entry.
template <class T>
double rescaled(const T* x, std::size_t m, double maxabs, int threads) {
  const std::size_t blocks = block_count(m);
  std::vector<double> sums(blocks, 0.0);
  std::vector<std::size_t> bad(blocks, m);
  parallel_for(threads, blocks, [&](std::size_t b) {
    const std::size_t lo = b * kSquaresBlock, hi = std::min(m, lo + kSquaresBlock);
    double total = 0.0;
    for (std::size_t k = lo; k < hi; ++k) {
      const double v = static_cast<double>(x[k]);
      if (!std::isfinite(v)) {
        bad[b] = k;
        return;
      }
      const double u = v / maxabs;
      total += u * u;
    }
    sums[b] = total;
  });
  for (std::size_t b = 0; b < blocks; ++b) {
    if (bad[b] != m) {
      throw InvalidArgument("input contains a non-finite value (NaN or Inf) at flat index " +
                            std::to_string(bad[b]));
    }
  }
  if (maxabs == 0.0) return 0.0;
  // The result may be +inf, which the caller treats as "clip to the bound".
  return tree_sum(sums.data(), sums.size()) * maxabs * maxabs;
}

}  // namespace

template <class T>
NormPass norm_pass(const T* x, std::size_t m, SumOrder order, int threads) {
  const std::size_t blocks = block_count(m);
  std::vector<double> sums(blocks);
  std::vector<double> maxima(blocks);
  parallel_for(threads, blocks, [&](std::size_t b) {
    const std::size_t lo = b * kSquaresBlock;
    const Squares s = block_squares(x + lo, std::min(m - lo, kSquaresBlock), order);
    sums[b] = s.total;
    maxima[b] = s.maxabs;
  });
  // The largest magnitude (a NaN block's maximum may be anything: the
  // second pass then finds the NaN and throws).
  double maxabs = 0.0;
  for (const double v : maxima) maxabs = v > maxabs ? v : maxabs;
  const double total = tree_sum(sums.data(), sums.size());
  if (std::isfinite(total) && total > 0x1.0p-900) return {total, maxabs};
  // Overflow, underflow or a non-finite entry: accumulate (x / maxabs)^2
  // and scale back.
  return {rescaled(x, m, maxabs, threads), maxabs};
}

template <class T>
double sum_of_squares(const T* x, std::size_t m, SumOrder order, int threads) {
  return norm_pass(x, m, order, threads).sum_squares;
}

template double sum_of_squares<float>(const float*, std::size_t, SumOrder, int);
template double sum_of_squares<double>(const double*, std::size_t, SumOrder, int);
template NormPass norm_pass<float>(const float*, std::size_t, SumOrder, int);
template NormPass norm_pass<double>(const double*, std::size_t, SumOrder, int);

}  // namespace cepam
