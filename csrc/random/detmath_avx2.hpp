// The deterministic maths of random/detmath.hpp for four doubles at a time
// (internal header, for .cpp files only), with the building blocks of
// common/simd_avx2.hpp and the same rules: each lane computes exactly what
// the scalar function it mirrors computes.
#pragma once

#include <cstdint>
#include <limits>

#include "common/simd_avx2.hpp"
#include "random/detmath.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>

namespace cepam::avx2 {

// detmath::log for four doubles.
CEPAM_TARGET_AVX2 inline __m256d log(__m256d x) {
  using namespace detmath::fdlibm;

  // Each 64-bit lane holds one double u; the scalar code's hx is its high
  // 32-bit half (the odd 32-bit lane), lx its low half.
  const __m256i u = _mm256_castpd_si256(x);
  const __m256i hx = _mm256_srli_epi64(u, 32);  // hx, zero-extended to 64 bits
  const __m256i hxm = _mm256_and_si256(hx, _mm256_set1_epi64x(0x000fffff));
  const __m256i i = _mm256_and_si256(_mm256_add_epi64(hxm, _mm256_set1_epi64x(0x95f64)),
                                     _mm256_set1_epi64x(0x100000));
  const __m256i mhi = _mm256_or_si256(hxm, _mm256_xor_si256(i, _mm256_set1_epi64x(0x3ff00000)));
  const __m256d m = _mm256_castsi256_pd(
      _mm256_or_si256(_mm256_slli_epi64(mhi, 32),
                      _mm256_and_si256(u, _mm256_set1_epi64x(0xffffffff))));
  // k = (hx >> 20) - 1023 + (i >> 20) in 32-bit arithmetic, computed in the
  // odd 32-bit lanes (arithmetic shift of hx, as the scalar int32), then
  // those four lanes are packed and converted exactly to double.
  const __m256i k_odd = _mm256_add_epi32(
      _mm256_sub_epi32(_mm256_srai_epi32(u, 20), _mm256_set1_epi64x(std::int64_t{1023} << 32)),
      _mm256_slli_epi64(_mm256_srli_epi64(i, 20), 32));
  const __m256i k_packed =
      _mm256_permutevar8x32_epi32(k_odd, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7));
  const __m256d dk = _mm256_cvtepi32_pd(_mm256_castsi256_si128(k_packed));

  const __m256d f = _mm256_sub_pd(m, splat(1.0));
  const __m256d s = _mm256_div_pd(f, _mm256_add_pd(splat(2.0), f));
  const __m256d z = _mm256_mul_pd(s, s);
  const __m256d w = _mm256_mul_pd(z, z);
  // t1 = w * (Lg2 + w * (Lg4 + w * Lg6)), t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)))
  const __m256d t1 = _mm256_mul_pd(w, horner(w, Lg2, Lg4, Lg6));
  const __m256d t2 = _mm256_mul_pd(z, horner(w, Lg1, Lg3, Lg5, Lg7));
  const __m256d R = _mm256_add_pd(t2, t1);
  const __m256d hfsq = _mm256_mul_pd(_mm256_mul_pd(splat(0.5), f), f);  // 0.5 * f * f
  // dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f)
  const __m256d inner = _mm256_add_pd(_mm256_mul_pd(s, _mm256_add_pd(hfsq, R)),
                                      _mm256_mul_pd(dk, splat(ln2_lo)));
  return _mm256_sub_pd(_mm256_mul_pd(dk, splat(ln2_hi)),
                       _mm256_sub_pd(_mm256_sub_pd(hfsq, inner), f));
}

// detmath::exp_bounded for four doubles: k by truncation (cvttpd, as the
// scalar int32 cast, exact for |x| <= 708), 2^k by adding k << 52 to the
// bits; the scalar code's three early returns are selections.
CEPAM_TARGET_AVX2 inline __m256d exp_bounded(__m256d x) {
  using namespace detmath::fdlibm;
  const __m256d zero = _mm256_setzero_pd();
  // k = (int32)(inv_ln2 * x + (x < 0 ? -0.5 : 0.5))
  const __m256d half = _mm256_blendv_pd(splat(0.5), splat(-0.5), _mm256_cmp_pd(x, zero, _CMP_LT_OQ));
  const __m128i k = _mm256_cvttpd_epi32(_mm256_add_pd(_mm256_mul_pd(splat(inv_ln2), x), half));
  const __m256d dk = _mm256_cvtepi32_pd(k);
  const __m256d hi = _mm256_sub_pd(x, _mm256_mul_pd(dk, splat(ln2_hi)));
  const __m256d lo = _mm256_mul_pd(dk, splat(ln2_lo));
  const __m256d r = _mm256_sub_pd(hi, lo);
  const __m256d t = _mm256_mul_pd(r, r);
  // c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
  const __m256d poly = horner(t, P1, P2, P3, P4, P5);
  const __m256d c = _mm256_sub_pd(r, _mm256_mul_pd(t, poly));
  // y = 1 - ((lo - (r * c) / (2 - c)) - hi)
  const __m256d y = _mm256_sub_pd(
      splat(1.0),
      _mm256_sub_pd(_mm256_sub_pd(lo, _mm256_div_pd(_mm256_mul_pd(r, c), _mm256_sub_pd(splat(2.0), c))),
                    hi));
  const __m256d scaled = _mm256_castsi256_pd(_mm256_add_epi64(
      _mm256_castpd_si256(y), _mm256_slli_epi64(_mm256_cvtepi32_epi64(k), 52)));
  // |x| < 2^-28: 1 + x; x > 708: +inf; !(x > -708): 0 (NaN too).
  const __m256d tiny = _mm256_and_pd(_mm256_cmp_pd(x, splat(-0x1.0p-28), _CMP_GT_OQ),
                                     _mm256_cmp_pd(x, splat(0x1.0p-28), _CMP_LT_OQ));
  __m256d out = _mm256_blendv_pd(scaled, _mm256_add_pd(splat(1.0), x), tiny);
  out = _mm256_blendv_pd(out, splat(std::numeric_limits<double>::infinity()),
                         _mm256_cmp_pd(x, splat(708.0), _CMP_GT_OQ));
  return _mm256_blendv_pd(zero, out, _mm256_cmp_pd(x, splat(-708.0), _CMP_GT_OQ));
}

// detmath::normal_cdf for four doubles (its early returns are selections).
CEPAM_TARGET_AVX2 inline __m256d normal_cdf(__m256d z) {
  using namespace detmath::normal_cdf_coeffs;
  const __m256d zero = _mm256_setzero_pd();
  const __m256d negative = _mm256_cmp_pd(z, zero, _CMP_LT_OQ);
  const __m256d a = _mm256_blendv_pd(z, _mm256_sub_pd(zero, z), negative);  // -z: exact, as -z
  const __m256d density = _mm256_mul_pd(
      splat(inv_sqrt_2pi), exp_bounded(_mm256_mul_pd(splat(-0.5), _mm256_mul_pd(z, z))));
  const __m256d t = _mm256_div_pd(splat(1.0), _mm256_add_pd(splat(1.0), _mm256_mul_pd(splat(p), a)));
  // tail = density * (t * (b1 + t * (b2 + t * (b3 + t * (b4 + t * b5)))))
  const __m256d poly = horner(t, b1, b2, b3, b4, b5);
  const __m256d tail = _mm256_mul_pd(density, _mm256_mul_pd(t, poly));
  __m256d out = _mm256_blendv_pd(_mm256_sub_pd(splat(1.0), tail), tail, negative);
  out = _mm256_blendv_pd(splat(1.0), out, _mm256_cmp_pd(z, splat(38.0), _CMP_LT_OQ));
  return _mm256_blendv_pd(zero, out, _mm256_cmp_pd(z, splat(-38.0), _CMP_GT_OQ));
}

CEPAM_TARGET_AVX2 inline __m256d kernel_cos(__m256d x) {
  using namespace detmath::fdlibm;
  const __m256d z = _mm256_mul_pd(x, x);
  // r = z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))))
  const __m256d r = _mm256_mul_pd(z, horner(z, C1, C2, C3, C4, C5, C6));
  const __m256d hz = _mm256_mul_pd(splat(0.5), z);
  const __m256d w = _mm256_sub_pd(splat(1.0), hz);
  // w + (((1.0 - w) - hz) + z * r)
  return _mm256_add_pd(
      w, _mm256_add_pd(_mm256_sub_pd(_mm256_sub_pd(splat(1.0), w), hz), _mm256_mul_pd(z, r)));
}

CEPAM_TARGET_AVX2 inline __m256d kernel_sin(__m256d x) {
  using namespace detmath::fdlibm;
  const __m256d z = _mm256_mul_pd(x, x);
  const __m256d v = _mm256_mul_pd(z, x);
  // r = S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))
  const __m256d r = horner(z, S2, S3, S4, S5, S6);
  // x + v * (S1 + z * r)
  return _mm256_add_pd(x, _mm256_mul_pd(v, _mm256_add_pd(splat(S1), _mm256_mul_pd(z, r))));
}

// cos(2 pi t)^2; the scalar branches become selections (blendv takes the
// second operand where the mask is set).  Ordered, quiet comparisons are
// false for NaN, like the scalar ones.
CEPAM_TARGET_AVX2 inline __m256d cos2pi_squared(__m256d t) {
  constexpr double two_pi = 6.28318530717958623200e+00;
  t = _mm256_blendv_pd(t, _mm256_sub_pd(t, splat(0.5)), _mm256_cmp_pd(t, splat(0.5), _CMP_GE_OQ));
  t = _mm256_blendv_pd(t, _mm256_sub_pd(splat(0.5), t), _mm256_cmp_pd(t, splat(0.25), _CMP_GT_OQ));
  const __m256d use_cos = _mm256_cmp_pd(t, splat(0.125), _CMP_LE_OQ);
  const __m256d c_cos = kernel_cos(_mm256_mul_pd(splat(two_pi), t));
  const __m256d c_sin = kernel_sin(_mm256_mul_pd(splat(two_pi), _mm256_sub_pd(splat(0.25), t)));
  const __m256d c = _mm256_blendv_pd(c_sin, c_cos, use_cos);
  return _mm256_mul_pd(c, c);
}

}  // namespace cepam::avx2

#endif  // CEPAM_X86_DISPATCH
