// The AVX2 forms of the A2, D4 and E8 trial and dither loops
// (lattice/voronoi_kernels.hpp), and the choice between them and the AVX-512
// forms (voronoi_kernels_avx512.cpp).  The lane code is
// lattice/voronoi_lanes.hpp over the four-lane operations below.
#include "lattice/voronoi_kernels.hpp"

#include "common/cpu.hpp"
#include "common/simd_avx2.hpp"
#include "lattice/registry.hpp"

#if CEPAM_X86_DISPATCH
// Everything from here on (voronoi_lanes.hpp included) is compiled for AVX2.
CEPAM_TARGET_BEGIN("avx2")
#include "common/lanes_avx2.hpp"
#include "lattice/voronoi_lanes.hpp"
#elif CEPAM_ARM_NEON
#include "common/lanes_neon.hpp"
#include "lattice/voronoi_lanes.hpp"
#endif

namespace cepam::kernels {
namespace {

#if CEPAM_X86_DISPATCH

// Rows r0..r3 (four doubles each) become the columns.
inline void transpose4(__m256d& r0, __m256d& r1, __m256d& r2, __m256d& r3) {
  const __m256d t0 = _mm256_unpacklo_pd(r0, r1);
  const __m256d t1 = _mm256_unpackhi_pd(r0, r1);
  const __m256d t2 = _mm256_unpacklo_pd(r2, r3);
  const __m256d t3 = _mm256_unpackhi_pd(r2, r3);
  r0 = _mm256_permute2f128_pd(t0, t2, 0x20);
  r1 = _mm256_permute2f128_pd(t1, t3, 0x20);
  r2 = _mm256_permute2f128_pd(t0, t2, 0x31);
  r3 = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// The operations of voronoi_lanes.hpp on four lanes (common/lanes_avx2.hpp)
// and the lattices' rows.
struct Avx2Ops : simd::Avx2Lanes {
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
};

// The AVX2 entry points (compiled for AVX2, like the lane code they choose).
std::size_t trials_avx2(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                        const std::size_t* idx, std::size_t count, const double* t,
                        const double* xs, const double* beta, const double* radius,
                        std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                        std::size_t* nrej) {
  return lanes::trials_of<Avx2Ops>(id, trial, w, idx, count, t, xs, beta, radius, H, q, V, rej,
                                   nrej);
}

std::size_t dither_avx2(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::dithers_of<Avx2Ops>(id, w, count, v);
}

#endif  // CEPAM_X86_DISPATCH

#if CEPAM_ARM_NEON
// The operations of voronoi_lanes.hpp on NEON's two lanes
// (common/lanes_neon.hpp) and the lattices' rows: cols[k] = (rows[0][k],
// rows[1][k]), two rows' coordinates k and k + 1 transposed at a time.
struct NeonOps : simd::NeonLanes {
  template <int N>
  static void load_cols(const double* const* rows, D* cols) {
    for (int k = 0; k < N; k += 2) {
      const D r0 = vld1q_f64(rows[0] + k), r1 = vld1q_f64(rows[1] + k);
      cols[k] = vzip1q_f64(r0, r1);
      cols[k + 1] = vzip2q_f64(r0, r1);
    }
  }
  template <int N>
  static void store_rows(const D* cols, double* const* rows, unsigned mask) {
    for (int k = 0; k < N; k += 2) {
      const D r0 = vzip1q_f64(cols[k], cols[k + 1]), r1 = vzip2q_f64(cols[k], cols[k + 1]);
      if (mask & 1u) vst1q_f64(rows[0] + k, r0);
      if (mask & 2u) vst1q_f64(rows[1] + k, r1);
    }
  }
};
#endif  // CEPAM_ARM_NEON

}  // namespace
}  // namespace cepam::kernels

#if CEPAM_X86_DISPATCH
CEPAM_TARGET_END
#endif

// The dispatch, compiled for the baseline target.
namespace cepam::kernels {
namespace {
#if CEPAM_X86_DISPATCH
bool use_avx2() { return simd_level() >= SimdLevel::Avx2; }
#endif
}  // namespace

std::size_t voronoi_trials(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                           const std::size_t* idx, std::size_t count, const double* t,
                           const double* xs, const double* beta, const double* radius,
                           std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                           std::size_t* nrej) {
  *nrej = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq())
    return avx512::voronoi_trials(id, trial, w, idx, count, t, xs, beta, radius, H, q, V, rej,
                                  nrej);
  if (use_avx2())
    return trials_avx2(id, trial, w, idx, count, t, xs, beta, radius, H, q, V, rej, nrej);
#elif CEPAM_ARM_NEON
  if (simd_level() >= SimdLevel::Neon)
    return lanes::trials_of<NeonOps>(id, trial, w, idx, count, t, xs, beta, radius, H, q, V,
                                     rej, nrej);  // (no target region: NEON is the baseline)
#else
  (void)id, (void)trial, (void)w, (void)idx, (void)count, (void)t, (void)xs, (void)beta,
      (void)radius, (void)H, (void)q, (void)V, (void)rej;
#endif
  return 0;
}

std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return avx512::voronoi_dither(id, w, count, v);
  if (use_avx2()) return dither_avx2(id, w, count, v);
#elif CEPAM_ARM_NEON
  if (simd_level() >= SimdLevel::Neon) return lanes::dithers_of<NeonOps>(id, w, count, v);
#else
  (void)id, (void)w, (void)count, (void)v;
#endif
  return 0;
}


template <class T>
std::size_t voronoi_reconstruct(LatticeId id, const std::int64_t* q, const double* v,
                                const double* beta, std::size_t count, T* y) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return avx512::voronoi_reconstruct(id, q, v, beta, count, y);
#else
  (void)id, (void)q, (void)v, (void)beta, (void)count, (void)y;
#endif
  return 0;
}
template std::size_t voronoi_reconstruct<float>(LatticeId, const std::int64_t*, const double*,
                                                const double*, std::size_t, float*);
template std::size_t voronoi_reconstruct<double>(LatticeId, const std::int64_t*, const double*,
                                                 const double*, std::size_t, double*);

}  // namespace cepam::kernels
