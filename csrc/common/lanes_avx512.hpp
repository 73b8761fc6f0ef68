// The eight-lane operations (AVX-512 F, DQ and VL) of the kernels written
// once for SIMD lanes (lattice/zn_lanes.hpp, voronoi_lanes.hpp,
// coding/cell_lanes.hpp, lrsuq/maxwell_lanes.hpp), which name them S;
// common/lanes_avx2.hpp has the four-lane ones and says what each does.
// Internal header: include it, and the lane code, after a
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
  static D uniform_low(D w) {  // (common/lanes_avx2.hpp says what it is)
    const __m512i low = _mm512_and_si512(_mm512_castpd_si512(w),
                                         _mm512_set1_epi64((std::int64_t{1} << 53) - 1));
    return _mm512_mul_pd(_mm512_cvtepi64_pd(low), _mm512_set1_pd(0x1.0p-53));
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
  static I32 shr_i32(I32 a, int k) { return _mm256_srli_epi32(a, k); }  // logical
  static I32 and_i32(I32 a, I32 b) { return _mm256_and_si256(a, b); }
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
  // Rows to columns and back, for the lane code's loads and stores of
  // sub-vectors and table rows: cols[k] lane l = rows[l][k] for k < N
  // (load_cols), and the inverse for the lanes in mask (store_rows).
  template <int N>
  static void load_cols(const double* const* rows, D* cols) {
    static_assert(N == 2 || N == 4 || N == 8, "2, 4 or 8 columns");
    if constexpr (N == 8) {
      for (int l = 0; l < 8; ++l) cols[l] = _mm512_loadu_pd(rows[l]);
      transpose8(cols);
    } else if constexpr (N == 2) {
      // [r0 r2 r4 r6] and [r1 r3 r5 r7], interleaved.
      __m512d z[2];
      for (int a = 0; a < 2; ++a) {
        z[a] = _mm512_castpd128_pd512(_mm_loadu_pd(rows[a]));
        z[a] = _mm512_insertf64x2(z[a], _mm_loadu_pd(rows[a + 2]), 1);
        z[a] = _mm512_insertf64x2(z[a], _mm_loadu_pd(rows[a + 4]), 2);
        z[a] = _mm512_insertf64x2(z[a], _mm_loadu_pd(rows[a + 6]), 3);
      }
      cols[0] = _mm512_unpacklo_pd(z[0], z[1]);
      cols[1] = _mm512_unpackhi_pd(z[0], z[1]);
    } else {
      // z_a = rows a and a + 4; then a 4 x 4 transpose in each half.
      __m512d z[4], t[4];
      for (int a = 0; a < 4; ++a)
        z[a] = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(rows[a])),
                                  _mm256_loadu_pd(rows[a + 4]), 1);
      t[0] = _mm512_unpacklo_pd(z[0], z[1]);
      t[1] = _mm512_unpackhi_pd(z[0], z[1]);
      t[2] = _mm512_unpacklo_pd(z[2], z[3]);
      t[3] = _mm512_unpackhi_pd(z[2], z[3]);
      cols[0] = _mm512_permutex2var_pd(t[0], low_pairs(), t[2]);
      cols[1] = _mm512_permutex2var_pd(t[1], low_pairs(), t[3]);
      cols[2] = _mm512_permutex2var_pd(t[0], high_pairs(), t[2]);
      cols[3] = _mm512_permutex2var_pd(t[1], high_pairs(), t[3]);
    }
  }
  template <int N>
  static void store_rows(const D* cols, double* const* rows, unsigned mask) {
    static_assert(N == 2 || N == 4 || N == 8, "2, 4 or 8 columns");
    if constexpr (N == 2) {
      const __m512d z[2] = {_mm512_unpacklo_pd(cols[0], cols[1]),   // [r0 r2 r4 r6]
                            _mm512_unpackhi_pd(cols[0], cols[1])};  // [r1 r3 r5 r7]
      for (int l = 0; l < 8; ++l) {
        if (!((mask >> l) & 1u)) continue;
        const __m512d x = z[l & 1];
        __m128d r;
        switch (l >> 1) {  // (the lane index of extractf64x2 is an immediate)
          case 0: r = _mm512_castpd512_pd128(x); break;
          case 1: r = _mm512_extractf64x2_pd(x, 1); break;
          case 2: r = _mm512_extractf64x2_pd(x, 2); break;
          default: r = _mm512_extractf64x2_pd(x, 3); break;
        }
        _mm_storeu_pd(rows[l], r);
      }
    } else if constexpr (N == 8) {
      __m512d r[8];
      for (int k = 0; k < 8; ++k) r[k] = cols[k];
      transpose8(r);
      for (int l = 0; l < 8; ++l)
        if ((mask >> l) & 1u) _mm512_storeu_pd(rows[l], r[l]);
    } else {
      // The inverse of load_cols<4>: z_a = rows a and a + 4.
      const __m512d t0 = _mm512_unpacklo_pd(cols[0], cols[1]);  // r0[0] r0[1] r2[0] r2[1] ...
      const __m512d t1 = _mm512_unpackhi_pd(cols[0], cols[1]);  // r1[0] r1[1] r3[0] r3[1] ...
      const __m512d t2 = _mm512_unpacklo_pd(cols[2], cols[3]);  // r0[2] r0[3] r2[2] r2[3] ...
      const __m512d t3 = _mm512_unpackhi_pd(cols[2], cols[3]);
      const __m512d z[4] = {_mm512_permutex2var_pd(t0, low_pairs(), t2),
                            _mm512_permutex2var_pd(t1, low_pairs(), t3),
                            _mm512_permutex2var_pd(t0, high_pairs(), t2),
                            _mm512_permutex2var_pd(t1, high_pairs(), t3)};
      for (int a = 0; a < 4; ++a) {
        if ((mask >> a) & 1u) _mm256_storeu_pd(rows[a], _mm512_castpd512_pd256(z[a]));
        if ((mask >> (a + 4)) & 1u) _mm256_storeu_pd(rows[a + 4], _mm512_extractf64x4_pd(z[a], 1));
      }
    }
  }

 private:
  // Interleaving indices for _mm512_permutex2var_pd: lanes 0, 1 of a, 0, 1
  // of b, 4, 5 of a, 4, 5 of b (low_pairs), and the same with 2, 3 and 6, 7
  // (high_pairs).
  static __m512i low_pairs() { return _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13); }
  static __m512i high_pairs() { return _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15); }

  // The 8 x 8 transpose of r[0..8) (its own inverse).
  static void transpose8(__m512d* r) {
    __m512d t[8], u[8];
    for (int a = 0; a < 4; ++a) {
      // r[2a][0] r[2a+1][0] r[2a][2] ..., then the odd coordinates
      t[2 * a] = _mm512_unpacklo_pd(r[2 * a], r[2 * a + 1]);
      t[2 * a + 1] = _mm512_unpackhi_pd(r[2 * a], r[2 * a + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 4 h .. 4 h + 3
      __m512d* th = t + 4 * h;
      u[4 * h + 0] = _mm512_permutex2var_pd(th[0], low_pairs(), th[2]);   // coordinates 0, 4
      u[4 * h + 1] = _mm512_permutex2var_pd(th[1], low_pairs(), th[3]);   // 1, 5
      u[4 * h + 2] = _mm512_permutex2var_pd(th[0], high_pairs(), th[2]);  // 2, 6
      u[4 * h + 3] = _mm512_permutex2var_pd(th[1], high_pairs(), th[3]);  // 3, 7
    }
    for (int k = 0; k < 4; ++k) {
      r[k] = _mm512_shuffle_f64x2(u[k], u[4 + k], 0x44);      // low halves: coordinate k
      r[k + 4] = _mm512_shuffle_f64x2(u[k], u[4 + k], 0xee);  // high halves: coordinate k + 4
    }
  }
};

}  // namespace cepam::simd

#endif  // CEPAM_X86_DISPATCH
