// The AVX-512 forms of the A2, D4 and E8 trial and dither loops
// (lattice/voronoi_kernels.hpp): the lane code of lattice/voronoi_lanes.hpp
// over the eight-lane operations of common/lanes_avx512.hpp (AVX-512 F, DQ
// and VL; masks are mask registers).  voronoi_kernels.cpp calls them where simd_avx512dq().
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

std::size_t voronoi_trials(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                           const std::size_t* idx, std::size_t count, const double* t,
                           const double* xs, const double* beta, const double* radius,
                           std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                           std::size_t* nrej) {
  *nrej = 0;
  return lanes::trials_of<simd::Avx512Lanes>(id, trial, w, idx, count, t, xs, beta, radius, H, q, V,
                                     rej, nrej);
}

template <class T>
std::size_t voronoi_reconstruct(LatticeId id, const std::int64_t* q, const double* v,
                                const double* beta, std::size_t count, T* y) {
  using S = simd::Avx512Lanes;
  return lanes::by_lattice<S>(id, [&](auto lat) {
    return lanes::reconstructs<S, decltype(lat)>(q, v, beta, count, y);
  });
}
template std::size_t voronoi_reconstruct<float>(LatticeId, const std::int64_t*, const double*,
                                                const double*, std::size_t, float*);
template std::size_t voronoi_reconstruct<double>(LatticeId, const std::int64_t*, const double*,
                                                 const double*, std::size_t, double*);

std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::dithers_of<simd::Avx512Lanes>(id, w, count, v);
}

}  // namespace cepam::kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
