// The AVX-512 forms of the A2, D4 and E8 trial and dither loops
// (lattice/voronoi_kernels.hpp): the lane code of lattice/voronoi_lanes.hpp
// over the eight-lane operations below (AVX-512 F, DQ and VL; masks are
// mask registers).  voronoi_kernels.cpp calls them where simd_avx512dq().
#include "lattice/voronoi_kernels.hpp"

#include "common/cpu.hpp"
#include "lattice/registry.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

// Everything from here on (voronoi_lanes.hpp included) is compiled for AVX-512.
CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")
#include "common/lanes_avx512.hpp"
#include "lattice/voronoi_lanes.hpp"

namespace cepam::kernels::avx512 {
namespace {

// Interleaving indices: lanes 0, 1 of a, 0, 1 of b, 4, 5 of a, 4, 5 of b
// (kLow), and the same with 2, 3 and 6, 7 (kHigh), for _mm512_permutex2var_pd.
inline __m512i low_pairs() { return _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13); }
inline __m512i high_pairs() { return _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15); }

// The 8 x 8 transpose of r[0..8) (its own inverse).
inline void transpose8(__m512d* r) {
  __m512d t[8], u[8];
  for (int a = 0; a < 4; ++a) {
    t[2 * a] = _mm512_unpacklo_pd(r[2 * a], r[2 * a + 1]);      // r[2a][0] r[2a+1][0] r[2a][2] ...
    t[2 * a + 1] = _mm512_unpackhi_pd(r[2 * a], r[2 * a + 1]);  // the odd coordinates
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

// The lane operations (common/lanes_avx512.hpp) and the lattices' rows.
struct Avx512Ops : simd::Avx512Lanes {
  template <int N>
  static void load_cols(const double* const* rows, D* cols) {
    static_assert(N == 2 || N == 4 || N == 8, "A2, D4 or E8");
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
    static_assert(N == 2 || N == 4 || N == 8, "A2, D4 or E8");
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
};

}  // namespace

std::size_t voronoi_trials(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                           const std::size_t* idx, std::size_t count, const double* t,
                           const double* xs, const double* beta, const double* radius,
                           std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                           std::size_t* nrej) {
  *nrej = 0;
  return lanes::trials_of<Avx512Ops>(id, trial, w, idx, count, t, xs, beta, radius, H, q, V,
                                     rej, nrej);
}

template <class T>
std::size_t voronoi_reconstruct(LatticeId id, const std::int64_t* q, const double* v,
                                const double* beta, std::size_t count, T* y) {
  using S = Avx512Ops;
  return lanes::by_lattice<S>(id, [&](auto lat) {
    return lanes::reconstructs<S, decltype(lat)>(q, v, beta, count, y);
  });
}
template std::size_t voronoi_reconstruct<float>(LatticeId, const std::int64_t*, const double*,
                                                const double*, std::size_t, float*);
template std::size_t voronoi_reconstruct<double>(LatticeId, const std::int64_t*, const double*,
                                                 const double*, std::size_t, double*);

std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::dithers_of<Avx512Ops>(id, w, count, v);
}

}  // namespace cepam::kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
