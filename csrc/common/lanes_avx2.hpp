// The four-lane operations (AVX2) of the kernels written once for SIMD lanes
// (lattice/zn_lanes.hpp, voronoi_lanes.hpp, coding/cell_lanes.hpp,
// lrsuq/maxwell_lanes.hpp), which name them S;
// common/lanes_avx512.hpp has the eight-lane ones.  Internal header: include
// it, and the lane code, after a target("avx2") pragma (as
// lattice/voronoi_kernels.cpp and coding/conditional_coder.cpp do), so that
// these functions are compiled for AVX2 and inline into the lane code.
//
// Each operation computes, per lane, what the scalar code it stands for
// computes (common/simd_avx2.hpp explains the rules).  Masks M are vectors of
// all-ones or zero lanes; I32 holds one 32-bit integer a lane.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/simd_avx2.hpp"

#if CEPAM_X86_DISPATCH
#include <immintrin.h>

namespace cepam::simd {

struct Avx2Lanes {
  static constexpr int L = 4;
  using D = __m256d;
  using M = __m256d;
  using I32 = __m128i;
  static D splat(double v) { return _mm256_set1_pd(v); }
  static D load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, D a) { _mm256_storeu_pd(p, a); }
  // T(a) at p, T double or float (rounded as static_cast<float>).
  static void store_as(double* p, D a) { store(p, a); }
  static void store_as(float* p, D a) { _mm_storeu_ps(p, _mm256_cvtpd_ps(a)); }
  // The four integers at p (|q| <= 2^53), as static_cast<double> (exact).
  static D load_int64_as_double(const std::int64_t* p) {
    return avx2::to_double(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static D add(D a, D b) { return _mm256_add_pd(a, b); }
  static D sub(D a, D b) { return _mm256_sub_pd(a, b); }
  static D mul(D a, D b) { return _mm256_mul_pd(a, b); }
  static D div(D a, D b) { return _mm256_div_pd(a, b); }
  static D add_where(M m, D a, D b) { return _mm256_blendv_pd(a, _mm256_add_pd(a, b), m); }
  static D floor(D a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static D max(D a, D b) { return _mm256_max_pd(a, b); }  // a > b ? a : b
  static M ge(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_GE_OQ); }
  static M gt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
  static M lt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static M le(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
  static M eq(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
  // !(a > b) and !(a < b): true where either is NaN.
  static M not_gt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_NGT_UQ); }
  static M not_lt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_NLT_UQ); }
  static D blend(M m, D a, D b) { return _mm256_blendv_pd(a, b, m); }
  static M both(M a, M b) { return _mm256_and_pd(a, b); }
  static M either(M a, M b) { return _mm256_or_pd(a, b); }
  static unsigned bits(M m) { return static_cast<unsigned>(_mm256_movemask_pd(m)); }
  static D abs(D a) { return _mm256_andnot_pd(splat(-0.0), a); }
  static M odd(D s) {
    const __m256i one = _mm256_set1_epi64x(1);
    return _mm256_castsi256_pd(
        _mm256_cmpeq_epi64(_mm256_and_si256(avx2::to_int64(s), one), one));
  }
  static D int64_bits(D f) { return _mm256_castsi256_pd(avx2::to_int64(f)); }
  static D uniform_co(D w) { return avx2::uniform_co(_mm256_castpd_si256(w)); }
  // double(w mod 2^53) 2^-53 (uniform_co of w << 11), of the words whose bit
  // patterns are w (the Maxwell ziggurat's abscissa).
  static D uniform_low(D w) {
    return avx2::uniform_co(_mm256_slli_epi64(_mm256_castpd_si256(w), 11));
  }
  static D gather(const double* base, const std::size_t* c) {
    static_assert(sizeof(std::size_t) == 8, "64-bit indices");
    return _mm256_i64gather_pd(base, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)), 8);
  }

  // 32-bit integers.
  static I32 splat_i32(std::int32_t v) { return _mm_set1_epi32(v); }
  // static_cast<std::int32_t> where it is defined (INT32_MIN elsewhere).
  static I32 trunc_i32(D a) { return _mm256_cvttpd_epi32(a); }
  static D from_i32(I32 a) { return _mm256_cvtepi32_pd(a); }
  static I32 add_i32(I32 a, I32 b) { return _mm_add_epi32(a, b); }
  static I32 sub_i32(I32 a, I32 b) { return _mm_sub_epi32(a, b); }
  static I32 min_i32(I32 a, I32 b) { return _mm_min_epi32(a, b); }
  static I32 max_i32(I32 a, I32 b) { return _mm_max_epi32(a, b); }
  static I32 shr_i32(I32 a, int k) { return _mm_srli_epi32(a, k); }  // logical
  static I32 and_i32(I32 a, I32 b) { return _mm_and_si128(a, b); }
  static unsigned gt_i32(I32 a, I32 b) {  // bit l: a_l > b_l (signed)
    return static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(a, b))));
  }
  static D trunc(D a) { return _mm256_round_pd(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
  // base[i_l]: a gather (for throughput), or with gather_loads four loads,
  // which take more instructions but give the result sooner (for a serial
  // chain; a gather takes twice as long on recent Intel processors).
  static D gather(const double* base, I32 i) {
    return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), base, i,
                                    _mm256_castsi256_pd(_mm256_set1_epi64x(-1)), 8);
  }
  // lo_l and hi_l = the low and high 32 bits of the word whose bit pattern
  // is w_l, as unsigned integers: each half below the bits of 2^52 (the
  // double 2^52 + half), less 2^52; exact.
  static void uint32_halves(D w, D& lo, D& hi) {
    const __m256i bits = _mm256_castpd_si256(w);
    const __m256i two52 = _mm256_set1_epi64x(0x4330000000000000);
    const __m256d offset = _mm256_castsi256_pd(two52);
    lo = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_blend_epi32(bits, two52, 0xaa)), offset);
    hi = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_blend_epi32(_mm256_srli_epi64(bits, 32), two52, 0xaa)), offset);
  }
  static D gather_loads(const double* base, I32 i) {
    alignas(16) std::int32_t k[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(k), i);
    return _mm256_setr_pd(base[k[0]], base[k[1]], base[k[2]], base[k[3]]);
  }
  // out[2 l] = a_l and out[2 l + 1] = b_l, for l = 0 .. 3.
  static void store_pairs(void* out, I32 a, I32 b) {
    _mm_storeu_si128(static_cast<__m128i*>(out), _mm_unpacklo_epi32(a, b));
    _mm_storeu_si128(static_cast<__m128i*>(out) + 1, _mm_unpackhi_epi32(a, b));
  }
  // Rows to columns and back, for the lane code's loads and stores of
  // sub-vectors and table rows: cols[k] lane l = rows[l][k] for k < N
  // (load_cols), and the inverse for the lanes in mask (store_rows).
  template <int N>
  static void load_cols(const double* const* rows, D* cols) {
    if constexpr (N == 2) {
      // [r0 | r2] and [r1 | r3], interleaved.
      const __m256d a = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(rows[0])),
                                             _mm_loadu_pd(rows[2]), 1);
      const __m256d b = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(rows[1])),
                                             _mm_loadu_pd(rows[3]), 1);
      cols[0] = _mm256_unpacklo_pd(a, b);
      cols[1] = _mm256_unpackhi_pd(a, b);
    } else {
      for (int k = 0; k < N; k += 4) {
        __m256d r0 = _mm256_loadu_pd(rows[0] + k), r1 = _mm256_loadu_pd(rows[1] + k),
                r2 = _mm256_loadu_pd(rows[2] + k), r3 = _mm256_loadu_pd(rows[3] + k);
        transpose4(r0, r1, r2, r3);
        cols[k] = r0;
        cols[k + 1] = r1;
        cols[k + 2] = r2;
        cols[k + 3] = r3;
      }
    }
  }
  template <int N>
  static void store_rows(const D* cols, double* const* rows, unsigned mask) {
    if constexpr (N == 2) {
      const __m256d r[2] = {_mm256_unpacklo_pd(cols[0], cols[1]),   // [r0 | r2]
                            _mm256_unpackhi_pd(cols[0], cols[1])};  // [r1 | r3]
      for (int l = 0; l < 4; ++l) {
        if (!((mask >> l) & 1u)) continue;
        const __m256d x = r[l & 1];
        _mm_storeu_pd(rows[l], l < 2 ? _mm256_castpd256_pd128(x) : _mm256_extractf128_pd(x, 1));
      }
    } else {
      for (int k = 0; k < N; k += 4) {
        __m256d r[4] = {cols[k], cols[k + 1], cols[k + 2], cols[k + 3]};
        transpose4(r[0], r[1], r[2], r[3]);
        for (int l = 0; l < 4; ++l)
          if ((mask >> l) & 1u) _mm256_storeu_pd(rows[l] + k, r[l]);
      }
    }
  }

 private:
  // Rows r0..r3 (four doubles each) become the columns.
  static void transpose4(__m256d& r0, __m256d& r1, __m256d& r2, __m256d& r3) {
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1);
    const __m256d t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3);
    const __m256d t3 = _mm256_unpackhi_pd(r2, r3);
    r0 = _mm256_permute2f128_pd(t0, t2, 0x20);
    r1 = _mm256_permute2f128_pd(t1, t3, 0x20);
    r2 = _mm256_permute2f128_pd(t0, t2, 0x31);
    r3 = _mm256_permute2f128_pd(t1, t3, 0x31);
  }
};

}  // namespace cepam::simd

#endif  // CEPAM_X86_DISPATCH
