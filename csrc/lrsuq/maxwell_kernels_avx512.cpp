// The AVX-512 form of kernels::maxwell_radii (lrsuq/maxwell_kernels.hpp):
// the lane code of lrsuq/maxwell_lanes.hpp over the eight-lane operations of
// common/lanes_avx512.hpp (AVX-512 F, DQ and VL).  maxwell_kernels.cpp calls
// it where simd_avx512dq().
#include "lrsuq/maxwell_kernels.hpp"

#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

// Everything from here on (maxwell_lanes.hpp included) is compiled for AVX-512.
CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")
#include "common/lanes_avx512.hpp"
#include "lrsuq/maxwell_lanes.hpp"

namespace cepam::kernels::avx512 {

std::size_t maxwell_radii(double sigma, const std::uint64_t* w, std::size_t count, double* out,
                          std::uint64_t* slow, std::size_t* nslow) {
  return lanes::maxwell_radii<simd::Avx512Lanes>(sigma, w, count, out, slow, nslow);
}

}  // namespace cepam::kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
