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

// Blocks a task takes together where the threads have that many each (the
// fixed order's AVX2 form interleaves their chains: fixed_avx2_blocks).
constexpr std::size_t kBlocksTogether = 4;

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

// SumOrder::Fixed for kBlocksTogether whole blocks at x, x + kSquaresBlock,
// ...: each block's four accumulators are the lanes of one register, as in
// fixed_avx2, and the blocks' registers run side by side, so that their
// chains of sums overlap (one block's chain is bound by the latency of its
// additions): the same sums and maxima as fixed_avx2 of each block.
template <class T>
CEPAM_TARGET_AVX2 void fixed_avx2_blocks(const T* x, Squares* out) {
  static_assert(kSquaresBlock % 4 == 0, "whole groups of four: no tail");
  __m256d acc[kBlocksTogether], mx[kBlocksTogether];
  for (std::size_t b = 0; b < kBlocksTogether; ++b) acc[b] = mx[b] = _mm256_setzero_pd();
  for (std::size_t i = 0; i < kSquaresBlock; i += 4)
    for (std::size_t b = 0; b < kBlocksTogether; ++b)
      accumulate(load4(x + b * kSquaresBlock + i), acc[b], mx[b]);
  for (std::size_t b = 0; b < kBlocksTogether; ++b)
    out[b] = {(lane(acc[b], 0) + lane(acc[b], 1)) + (lane(acc[b], 2) + lane(acc[b], 3)),
              std::fmax(std::fmax(lane(mx[b], 0), lane(mx[b], 1)),
                        std::fmax(lane(mx[b], 2), lane(mx[b], 3)))};
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

// Blocks [b0, b1) of x[0..m) into out[0 .. b1 - b0): block_squares of each,
// kBlocksTogether whole blocks at a time where the fixed order runs on AVX2
// (the same sums).
template <class T>
void block_range_squares(const T* x, std::size_t m, std::size_t b0, std::size_t b1,
                         SumOrder order, Squares* out) {
  std::size_t b = b0;
#if CEPAM_X86_DISPATCH
  if (order == SumOrder::Fixed && simd_level() >= SimdLevel::Avx2)
    for (; b + kBlocksTogether <= b1 && (b + kBlocksTogether) * kSquaresBlock <= m;
         b += kBlocksTogether)
      fixed_avx2_blocks(x + b * kSquaresBlock, out + (b - b0));
#endif
  for (; b < b1; ++b) {
    const std::size_t lo = b * kSquaresBlock;
    out[b - b0] = block_squares(x + lo, std::min(m - lo, kSquaresBlock), order);
  }
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
  std::vector<Squares> squares(blocks);
  // Tasks of kBlocksTogether blocks where every thread has that many (else
  // one block a task, for the threads).
  const std::size_t k =
      blocks >= kBlocksTogether * static_cast<std::size_t>(threads < 1 ? 1 : threads)
          ? kBlocksTogether
          : 1;
  parallel_for(threads, (blocks + k - 1) / k, [&](std::size_t t) {
    const std::size_t b0 = t * k;
    block_range_squares(x, m, b0, std::min(blocks, b0 + k), order, squares.data() + b0);
  });
  std::vector<double> sums(blocks);
  // The largest magnitude (a NaN block's maximum may be anything: the
  // second pass then finds the NaN and throws).
  double maxabs = 0.0;
  for (std::size_t b = 0; b < blocks; ++b) {
    sums[b] = squares[b].total;
    maxabs = squares[b].maxabs > maxabs ? squares[b].maxabs : maxabs;
  }
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
