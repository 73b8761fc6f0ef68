// The eight-lane operations (AVX-512 F, DQ and VL) of the kernels written
// once for SIMD lanes (lattice/zn_lanes.hpp, voronoi_lanes.hpp, coding/cell_lanes.hpp),
// which name them S; common/lanes_avx2.hpp has the four-lane ones and says
// what each does.  Internal header: include it, and the lane code, after a
// target("avx512f,avx512dq,avx512vl") pragma (as
// lattice/voronoi_kernels_avx512.cpp and coding/conditional_coder_avx512.cpp
// do), and call what it compiles only where simd_avx512dq().  Masks M are
// mask registers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>

namespace cepam::simd {

struct Avx512Lanes {
  static constexpr int L = 8;
  using D = __m512d;
  using M = __mmask8;
  using I32 = __m256i;
  static D splat(double v) { return _mm512_set1_pd(v); }
  static D load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, D a) { _mm512_storeu_pd(p, a); }
  static void store_as(double* p, D a) { store(p, a); }
  static void store_as(float* p, D a) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(a)); }
  static D load_int64_as_double(const std::int64_t* p) {
    return _mm512_cvtepi64_pd(_mm512_loadu_si512(p));  // exact for |q| <= 2^53
  }
  static D add(D a, D b) { return _mm512_add_pd(a, b); }
  static D sub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D mul(D a, D b) { return _mm512_mul_pd(a, b); }
  static D div(D a, D b) { return _mm512_div_pd(a, b); }
  static D add_where(M m, D a, D b) { return _mm512_mask_add_pd(a, m, a, b); }
  static D floor(D a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static D max(D a, D b) { return _mm512_max_pd(a, b); }
  static M ge(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ); }
  static M gt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
  static M lt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static M le(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
  static M eq(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
  static M not_gt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_NGT_UQ); }
  static M not_lt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_NLT_UQ); }
  static D blend(M m, D a, D b) { return _mm512_mask_blend_pd(m, a, b); }
  static M both(M a, M b) { return static_cast<M>(a & b); }
  static M either(M a, M b) { return static_cast<M>(a | b); }
  static unsigned bits(M m) { return m; }
  static D abs(D a) { return _mm512_abs_pd(a); }
  // Integral |s| < 2^51: truncation is exact.
  static M odd(D s) {
    return _mm512_test_epi64_mask(_mm512_cvttpd_epi64(s), _mm512_set1_epi64(1));
  }
  static D int64_bits(D f) { return _mm512_castsi512_pd(_mm512_cvttpd_epi64(f)); }
  // double(w >> 11) 2^-53: the conversion of an integer below 2^53 is exact.
  static D uniform_co(D w) {
    const __m512i top = _mm512_srli_epi64(_mm512_castpd_si512(w), 11);
    return _mm512_mul_pd(_mm512_cvtepi64_pd(top), _mm512_set1_pd(0x1.0p-53));
  }
  using I = __m512i;
  static I int64_of_bits(D a) { return _mm512_castpd_si512(a); }
  static I iadd(I a, I b) { return _mm512_add_epi64(a, b); }
  static I isub(I a, I b) { return _mm512_sub_epi64(a, b); }
  static D to_double(I a) { return _mm512_cvtepi64_pd(a); }  // rounds to nearest
  static D gather(const double* base, const std::size_t* c) {
    static_assert(sizeof(std::size_t) == 8, "64-bit indices");
    return _mm512_i64gather_pd(_mm512_loadu_si512(c), base, 8);
  }

  // 32-bit integers.
  static I32 splat_i32(std::int32_t v) { return _mm256_set1_epi32(v); }
  static I32 trunc_i32(D a) { return _mm512_cvttpd_epi32(a); }
  static D from_i32(I32 a) { return _mm512_cvtepi32_pd(a); }
  static I32 add_i32(I32 a, I32 b) { return _mm256_add_epi32(a, b); }
  static I32 sub_i32(I32 a, I32 b) { return _mm256_sub_epi32(a, b); }
  static I32 min_i32(I32 a, I32 b) { return _mm256_min_epi32(a, b); }
  static I32 max_i32(I32 a, I32 b) { return _mm256_max_epi32(a, b); }
  static unsigned gt_i32(I32 a, I32 b) { return _mm256_cmpgt_epi32_mask(a, b); }
  static D trunc(D a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  static D gather(const double* base, I32 i) { return _mm512_i32gather_pd(i, base, 8); }
  // lo_l and hi_l = the low and high 32 bits of the word whose bit pattern
  // is w_l, as unsigned integers (exact doubles).
  static void uint32_halves(D w, D& lo, D& hi) {
    const __m512i bits = _mm512_castpd_si512(w);
    lo = _mm512_cvtepu64_pd(_mm512_and_si512(bits, _mm512_set1_epi64(0xffffffff)));
    hi = _mm512_cvtepu64_pd(_mm512_srli_epi64(bits, 32));
  }
  // out[2 l] = a_l and out[2 l + 1] = b_l, for l = 0 .. 7.
  static void store_pairs(void* out, I32 a, I32 b) {
    const __m512i pairs = _mm512_or_si512(_mm512_cvtepu32_epi64(a),
                                          _mm512_slli_epi64(_mm512_cvtepu32_epi64(b), 32));
    _mm512_storeu_si512(out, pairs);
  }
};

}  // namespace cepam::simd

#endif  // CEPAM_X86_DISPATCH
