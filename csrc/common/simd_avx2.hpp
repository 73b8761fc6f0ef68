// AVX2 building blocks shared by the SIMD kernels of every floor (internal
// header, for .cpp files only); the deterministic maths in four lanes is in
// random/detmath_avx2.hpp.
//
// Every function here is compiled for the AVX2 target only (which does not
// enable FMA, so no multiply-add can be contracted) and computes, for each
// of four lanes, exactly what the scalar code it mirrors computes: the same
// IEEE operations in the same order, integer bit manipulations on the same
// bits, and branches turned into selections between both computed
// alternatives (_mm256_blendv_pd takes its second operand where the mask is
// set; the ordered, quiet comparisons are false for NaN, like the scalar
// ones).  Callers select these kernels at run time (common/cpu.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>

namespace cepam::avx2 {

// AVX2 has no conversions between 64-bit integers and
// doubles, so they are done exactly with the usual bit tricks:
//
// to_double(q), |q| <= 2^53: q = hi 2^32 + lo with hi = q >> 32 (signed)
// and lo = q mod 2^32.  Writing lo into the low mantissa bits of 2^52 gives
// the double 2^52 + lo, and hi + 2^31 (hi with its sign bit flipped) into
// those of 2^84 gives 2^84 + (hi + 2^31) 2^32; subtracting 2^52 and
// 2^84 + 2^63 is exact (same binade), and so is adding the two halves,
// because their sum q is representable.  Same value as static_cast<double>.
CEPAM_TARGET_AVX2 inline __m256d to_double(__m256i q) {
  const __m256i hi = _mm256_xor_si256(_mm256_srli_epi64(q, 32), _mm256_set1_epi64x(0x80000000));
  const __m256i lo = _mm256_and_si256(q, _mm256_set1_epi64x(0xffffffff));
  const __m256d hi_d = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(hi, _mm256_set1_epi64x(0x4530000000000000))),
      _mm256_set1_pd(0x1.000008p84));  // 2^84 + 2^63
  const __m256d lo_d = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(lo, _mm256_set1_epi64x(0x4330000000000000))),
      _mm256_set1_pd(0x1.0p52));
  return _mm256_add_pd(hi_d, lo_d);
}

// to_int64(f) for integral |f| < 2^51: f + 1.5 2^52 is exact and lies in
// [2^52, 2^53), where the integers are consecutive bit patterns, so the
// difference of the bit patterns is f.  Same value as static_cast.
CEPAM_TARGET_AVX2 inline __m256i to_int64(__m256d f) {
  const __m256d magic = _mm256_set1_pd(0x1.8p52);
  return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(f, magic)),
                          _mm256_castpd_si256(magic));
}

// uniform_co(w) = double(w >> 11) 2^-53 and uniform_oc(w) =
// double((w >> 11) + 1) 2^-53 (random/chacha20.hpp) for four words.
CEPAM_TARGET_AVX2 inline __m256d uniform_co(__m256i w) {
  return _mm256_mul_pd(to_double(_mm256_srli_epi64(w, 11)), _mm256_set1_pd(0x1.0p-53));
}
CEPAM_TARGET_AVX2 inline __m256d uniform_oc(__m256i w) {
  const __m256i bits = _mm256_add_epi64(_mm256_srli_epi64(w, 11), _mm256_set1_epi64x(1));
  return _mm256_mul_pd(to_double(bits), _mm256_set1_pd(0x1.0p-53));
}

// v = uniform_co(w) - 0.5 for the four words at w.
CEPAM_TARGET_AVX2 inline __m256d uniform_co_minus_half(const std::uint64_t* w) {
  return _mm256_sub_pd(uniform_co(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w))),
                       _mm256_set1_pd(0.5));
}

// The words p[0], p[stride], p[2 stride], p[3 stride].
CEPAM_TARGET_AVX2 inline __m256i load_strided(const std::uint64_t* p, std::size_t stride) {
  return _mm256_setr_epi64x(static_cast<long long>(p[0]), static_cast<long long>(p[stride]),
                            static_cast<long long>(p[2 * stride]),
                            static_cast<long long>(p[3 * stride]));
}

CEPAM_TARGET_AVX2 inline __m256d splat(double v) { return _mm256_set1_pd(v); }

// c0 + t (c1 + t (c2 + ...)), innermost first: the scalar code's Horner
// chains (the operands of a product or sum in either order: the same IEEE
// result).
CEPAM_TARGET_AVX2 inline __m256d horner(__m256d, double c) { return splat(c); }
template <class... More>
CEPAM_TARGET_AVX2 inline __m256d horner(__m256d t, double c, More... more) {
  return _mm256_add_pd(splat(c), _mm256_mul_pd(t, horner(t, more...)));
}

// Four elements of x as doubles (floats widened exactly), and four doubles
// stored as T (rounded to nearest for float, as static_cast<float>).
CEPAM_TARGET_AVX2 inline __m256d load_as_double(const float* x) {
  return _mm256_cvtps_pd(_mm_loadu_ps(x));
}
CEPAM_TARGET_AVX2 inline __m256d load_as_double(const double* x) { return _mm256_loadu_pd(x); }
CEPAM_TARGET_AVX2 inline void store_from_double(float* y, __m256d v) {
  _mm_storeu_ps(y, _mm256_cvtpd_ps(v));
}
CEPAM_TARGET_AVX2 inline void store_from_double(double* y, __m256d v) { _mm256_storeu_pd(y, v); }

}  // namespace cepam::avx2

#endif  // CEPAM_X86_DISPATCH
