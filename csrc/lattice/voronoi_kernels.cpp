// The AVX2 forms of the A2, D4 and E8 trial and dither loops
// (lattice/voronoi_kernels.hpp), and the choice between them and the AVX-512
// forms (voronoi_kernels_avx512.cpp).  The lane code is
// lattice/voronoi_lanes.hpp over the four-lane operations of
// common/lanes_avx2.hpp (and, on aarch64, the two-lane ones of
// common/lanes_neon.hpp).
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

// The AVX2 entry points (compiled for AVX2, like the lane code they choose).
std::size_t trials_avx2(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                        const std::size_t* idx, std::size_t count, const double* t,
                        const double* xs, const double* beta, const double* radius,
                        std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                        std::size_t* nrej) {
  return lanes::trials_of<simd::Avx2Lanes>(id, trial, w, idx, count, t, xs, beta, radius, H, q,
                                           V, rej, nrej);
}

std::size_t dither_avx2(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::dithers_of<simd::Avx2Lanes>(id, w, count, v);
}

#endif  // CEPAM_X86_DISPATCH


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
    return lanes::trials_of<simd::NeonLanes>(id, trial, w, idx, count, t, xs, beta, radius, H, q, V,
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
  if (simd_level() >= SimdLevel::Neon) return lanes::dithers_of<simd::NeonLanes>(id, w, count, v);
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
