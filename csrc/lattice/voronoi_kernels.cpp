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

// Everything from here to CEPAM_BASE_LANES_END (voronoi_lanes.hpp included) is
// compiled for the second level (AVX2 on x86-64).
CEPAM_BASE_LANES_BEGIN
#if CEPAM_BASE_LANES
#include "common/lanes_base.hpp"
#include "lattice/voronoi_lanes.hpp"

namespace cepam::kernels {
namespace {

// The entry points of this build's second level (compiled, on x86-64, for
// AVX2, like the lane code they choose).
std::size_t trials_base(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                        const std::size_t* idx, std::size_t count, const double* t,
                        const double* xs, const double* beta, const double* radius,
                        std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                        std::size_t* nrej) {
  return lanes::trials_of<simd::BaseLanes>(id, trial, w, idx, count, t, xs, beta, radius, H, q,
                                           V, rej, nrej);
}

std::size_t dither_base(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::dithers_of<simd::BaseLanes>(id, w, count, v);
}

}  // namespace
}  // namespace cepam::kernels
#endif  // CEPAM_BASE_LANES

CEPAM_BASE_LANES_END

// The dispatch, compiled for the baseline target.
namespace cepam::kernels {

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
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes())
    return trials_base(id, trial, w, idx, count, t, xs, beta, radius, H, q, V, rej, nrej);
#else
  (void)id, (void)trial, (void)w, (void)idx, (void)count, (void)t, (void)xs, (void)beta,
      (void)radius, (void)H, (void)q, (void)V, (void)rej;
#endif
  return 0;
}

std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) return avx512::voronoi_dither(id, w, count, v);
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes()) return dither_base(id, w, count, v);
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
