// The AVX-512 forms of the Z^n kernels (lattice/zn_kernels.hpp): the lane
// code of lattice/zn_lanes.hpp over the eight-lane operations of
// common/lanes_avx512.hpp (AVX-512 F, DQ and VL).  zn_kernels.cpp calls them
// where simd_avx512dq().
#include "lattice/zn_kernels.hpp"

#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

// Everything from here on (zn_lanes.hpp included) is compiled for AVX-512.
CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")
#include "common/lanes_avx512.hpp"
#include "lattice/zn_lanes.hpp"

namespace cepam::kernels::avx512 {

using S = simd::Avx512Lanes;

std::size_t zn_trial(const double* t, const double* xs, const double* beta,
                     const std::uint64_t* w, std::size_t count, bool l2_norm, std::int64_t* q,
                     double* dev, double* v) {
  return lanes::zn_trials<S>(t, xs, beta, w, count, l2_norm, q, dev, v);
}

std::size_t zn_dither(const std::uint64_t* w, std::size_t count, double* v) {
  return lanes::zn_dithers<S>(w, count, v);
}

template <class T>
std::size_t zn_reconstruct(const std::int64_t* q, const double* v, const double* beta,
                           std::size_t count, T* y) {
  return lanes::zn_reconstructs<S>(q, v, beta, count, y);
}
template std::size_t zn_reconstruct<float>(const std::int64_t*, const double*, const double*,
                                           std::size_t, float*);
template std::size_t zn_reconstruct<double>(const std::int64_t*, const double*, const double*,
                                            std::size_t, double*);

}  // namespace cepam::kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
