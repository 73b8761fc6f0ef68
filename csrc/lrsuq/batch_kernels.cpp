// Element-wise kernels of the LRSUQ loops (lrsuq/batch_kernels.hpp).  Each public
// function runs its AVX2 form (when available) over groups of four elements
// and finishes with the portable loop, which is also the whole computation
// without AVX2 and the reference the AVX2 forms mirror operation by
// operation (common/simd_avx2.hpp explains how that gives the same bits).
#include "lrsuq/batch_kernels.hpp"

#include <cmath>
#include <type_traits>

#include "random/chacha20.hpp"
#include "common/cpu.hpp"
#include "random/detmath.hpp"
#include "lrsuq/latent.hpp"
#include "lrsuq/subvector.hpp"

#include "random/detmath_avx2.hpp"

namespace cepam::kernels {
namespace {

#if CEPAM_X86_DISPATCH

// Four sub-vectors at a time (lane l: sub-vector c + l, its words W apart).
CEPAM_TARGET_AVX2 std::size_t gaussian_radii_avx2(int n, double sigma, const std::uint64_t* w,
                                                  std::size_t count, double* out) {
  const int k = n + 2;
  const std::size_t pairs = static_cast<std::size_t>(k / 2);
  const std::size_t W = static_cast<std::size_t>(gaussian_words(n));
  std::size_t c = 0;
  for (; c + 4 <= count; c += 4) {
    const std::uint64_t* wc = w + c * W;
    __m256d product = _mm256_set1_pd(1.0);
    for (std::size_t i = 0; i < pairs; ++i)
      product = _mm256_mul_pd(product, avx2::uniform_oc(avx2::load_strided(wc + i, W)));
    __m256d half = avx2::log(product);
    if (k % 2 == 1) {
      const __m256i wa = avx2::load_strided(wc + pairs, W);
      const __m256i wb = avx2::load_strided(wc + pairs + 1, W);
      const __m256d la = avx2::log(avx2::uniform_oc(wa));
      const __m256d cb = avx2::cos2pi_squared(avx2::uniform_co(wb));
      half = _mm256_add_pd(half, _mm256_mul_pd(la, cb));
    }
    const __m256d latent = _mm256_mul_pd(_mm256_set1_pd(-2.0), half);
    _mm256_storeu_pd(out + c, _mm256_mul_pd(_mm256_set1_pd(sigma), _mm256_sqrt_pd(latent)));
  }
  return c;
}

CEPAM_TARGET_AVX2 std::size_t laplace_radii_avx2(int n, double b, const std::uint64_t* w,
                                                 std::size_t count, double* out) {
  const std::size_t W = static_cast<std::size_t>(n + 1);
  const __m256d sign = _mm256_set1_pd(-0.0);
  std::size_t c = 0;
  for (; c + 4 <= count; c += 4) {
    const std::uint64_t* wc = w + c * W;
    __m256d product = _mm256_set1_pd(1.0);
    for (std::size_t i = 0; i < W; ++i)
      product = _mm256_mul_pd(product, avx2::uniform_oc(avx2::load_strided(wc + i, W)));
    const __m256d latent = _mm256_xor_pd(avx2::log(product), sign);  // -log: a sign flip
    _mm256_storeu_pd(out + c, _mm256_mul_pd(_mm256_set1_pd(b), latent));
  }
  return c;
}

template <class T>
CEPAM_TARGET_AVX2 std::size_t scale_inputs_avx2(const T* x, double factor, const double* inv_beta,
                                                double limit, std::size_t count, double* xs,
                                                double* t) {
  const __m256d fac = _mm256_set1_pd(factor);
  const __m256d lim = _mm256_set1_pd(limit);
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
  std::size_t e = 0;
  for (; e + 4 <= count; e += 4) {
    const __m256d s = _mm256_mul_pd(avx2::load_as_double(x + e), fac);
    const __m256d q = _mm256_mul_pd(s, _mm256_loadu_pd(inv_beta + e));
    _mm256_storeu_pd(xs + e, s);
    _mm256_storeu_pd(t + e, q);
    // Stop at the first group with an element out of range (or NaN); the
    // scalar loop below then finds the element.
    if (_mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(q, abs_mask), lim, _CMP_LT_OQ)) != 0xf)
      break;
  }
  return e;
}

bool use_avx2() { return simd_level() >= SimdLevel::Avx2; }

#endif  // CEPAM_X86_DISPATCH

// The portable radii loops, for sub-vectors [c, count); the dimension is
// N, or n when N = 0.  With N fixed they are also the AVX-512 kernels: the
// compiler vectorises them when compiled for AVX-512 (below), with the
// same operations per element (all it may do without -ffast-math).
template <int N>
inline void gaussian_radii_loop(int n, double sigma, const std::uint64_t* w, std::size_t c,
                                std::size_t count, double* out) {
  const std::size_t W = static_cast<std::size_t>(gaussian_words(N > 0 ? N : n));
  for (; c < count; ++c) out[c] = gaussian_radius<N>(n, sigma, w + c * W);
}

template <int N>
inline void laplace_radii_loop(int n, double b, const std::uint64_t* w, std::size_t c,
                               std::size_t count, double* out) {
  const std::size_t W = static_cast<std::size_t>((N > 0 ? N : n) + 1);
  for (; c < count; ++c) out[c] = laplace_radius<N>(n, b, w + c * W);
}

// f(std::integral_constant<int, N>{}) with N = n where 1 <= n <= Max, else
// N = 0 (the dimension read at run time).
template <int Max, class F>
inline void with_fixed_dim(int n, F&& f) {
  if constexpr (Max == 0) {
    f(std::integral_constant<int, 0>{});
  } else if (n == Max) {
    f(std::integral_constant<int, Max>{});
  } else {
    with_fixed_dim<Max - 1>(n, f);
  }
}

// The portable kernels from sub-vector c: the loops with the dimension
// fixed at compile time for n <= 4 (Gaussian) and n <= 3 (Laplace), which
// the compiler unrolls and, where it has 64-bit integer to double vector
// conversions (NEON on aarch64), vectorises; the loop with n read at run
// time for the others.  The same bits either way.  (The AVX-512 kernels
// below keep their switches: a lambda would not inherit their target.)
void gaussian_radii_portable(int n, double sigma, const std::uint64_t* w, std::size_t c,
                             std::size_t count, double* out) {
  with_fixed_dim<4>(n, [&](auto N) { gaussian_radii_loop<N()>(n, sigma, w, c, count, out); });
}
void laplace_radii_portable(int n, double b, const std::uint64_t* w, std::size_t c,
                            std::size_t count, double* out) {
  with_fixed_dim<3>(n, [&](auto N) { laplace_radii_loop<N()>(n, b, w, c, count, out); });
}

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the AVX-512 kernels: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
// The AVX-512 kernels, for the dimensions whose loops the compiler
// vectorises (GCC 12: 2 to 4 words per sub-vector, n <= 4 for Gaussian, 3
// for Laplace); false for the others, which keep the AVX2 kernels.
CEPAM_TARGET_AVX512DQ bool gaussian_radii_avx512(int n, double sigma, const std::uint64_t* w,
                                                 std::size_t count, double* out) {
  switch (n) {  // (n = 1: the Maxwell ziggurat, lrsuq/maxwell_kernels.hpp)
    case 2: gaussian_radii_loop<2>(n, sigma, w, 0, count, out); return true;
    case 3: gaussian_radii_loop<3>(n, sigma, w, 0, count, out); return true;
    case 4: gaussian_radii_loop<4>(n, sigma, w, 0, count, out); return true;
    default: return false;
  }
}
// reciprocals for the whole groups of eight: the processor's estimate
// (relative error below 2^-14) and two Newton steps y + y (1 - b y) (fused
// multiply-adds: relative error below 2^-56 before the last rounding, so y
// is within one ulp of 1 / b, a faithful reciprocal), then Markstein's
// step, the same on that y, whose residual 1 - b y is exact and whose
// result is the correctly rounded 1 / b for every b whose significand is
// not all ones (P. Markstein, IA-64 and Elementary Functions, 2000;
// J. Harrison, Formal verification of IA-64 division algorithms, 2000).  Lanes with that significand, or with an exponent
// beyond +-1000 (where a step could underflow or overflow), zero, infinite
// or NaN take the division.  Tests compare every result with 1.0 / b
// (tests/core/test_reciprocals.py).
CEPAM_TARGET_AVX512DQ std::size_t reciprocals_avx512(const double* b, std::size_t count,
                                                     double* out) {
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512i significand = _mm512_set1_epi64(0x000fffffffffffff);
  const __m512i exponent = _mm512_set1_epi64(0x7ff0000000000000);
  const __m512i lowest = _mm512_set1_epi64(std::int64_t{1023 - 1000} << 52);
  const __m512i highest = _mm512_set1_epi64(std::int64_t{1023 + 1000} << 52);
  std::size_t c = 0;
  for (; c + 8 <= count; c += 8) {
    const __m512d x = _mm512_loadu_pd(b + c);
    __m512d y = _mm512_rcp14_pd(x);
    for (int step = 0; step < 3; ++step) y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(x, y, one), y);
    const __m512i bits = _mm512_castpd_si512(x);
    const __m512i e = _mm512_and_si512(bits, exponent);
    const __mmask8 divide =
        _mm512_cmpeq_epi64_mask(_mm512_and_si512(bits, significand), significand) |
        _mm512_cmplt_epu64_mask(e, lowest) | _mm512_cmpgt_epu64_mask(e, highest);
    if (divide != 0) y = _mm512_mask_div_pd(y, divide, one, x);
    _mm512_storeu_pd(out + c, y);
  }
  return c;
}
CEPAM_TARGET_AVX512DQ bool laplace_radii_avx512(int n, double b, const std::uint64_t* w,
                                                std::size_t count, double* out) {
  switch (n) {
    case 1: laplace_radii_loop<1>(n, b, w, 0, count, out); return true;
    case 2: laplace_radii_loop<2>(n, b, w, 0, count, out); return true;
    case 3: laplace_radii_loop<3>(n, b, w, 0, count, out); return true;
    default: return false;
  }
}
CEPAM_AVX512_WARNINGS_ON
#endif

}  // namespace

void gaussian_radii(int n, double sigma, const std::uint64_t* w, std::size_t count, double* out) {
  std::size_t c = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq() && gaussian_radii_avx512(n, sigma, w, count, out)) return;
  if (use_avx2()) c = gaussian_radii_avx2(n, sigma, w, count, out);
#endif
  gaussian_radii_portable(n, sigma, w, c, count, out);
}

void laplace_radii(int n, double b, const std::uint64_t* w, std::size_t count, double* out) {
  std::size_t c = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq() && laplace_radii_avx512(n, b, w, count, out)) return;
  if (use_avx2()) c = laplace_radii_avx2(n, b, w, count, out);
#endif
  laplace_radii_portable(n, b, w, c, count, out);
}

void reciprocals(const double* b, std::size_t count, double* out) {
  std::size_t c = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) c = reciprocals_avx512(b, count, out);
#endif
  for (; c < count; ++c) out[c] = 1.0 / b[c];
}

template <class T>
std::size_t scale_inputs(const T* x, double factor, const double* inv_beta, double limit,
                         std::size_t count, double* xs, double* t) {
  std::size_t e = 0;
#if CEPAM_X86_DISPATCH
  if (use_avx2()) e = scale_inputs_avx2(x, factor, inv_beta, limit, count, xs, t);
#endif
  for (; e < count; ++e) {
    xs[e] = static_cast<double>(x[e]) * factor;
    t[e] = xs[e] * inv_beta[e];
    if (!(std::fabs(t[e]) < limit)) return e;
  }
  return count;
}

template std::size_t scale_inputs<float>(const float*, double, const double*, double, std::size_t,
                                         double*, double*);
template std::size_t scale_inputs<double>(const double*, double, const double*, double,
                                          std::size_t, double*, double*);
}  // namespace cepam::kernels
