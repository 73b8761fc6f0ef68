// kernels::maxwell_radii (lrsuq/maxwell_kernels.hpp): the lane code of
// lrsuq/maxwell_lanes.hpp where the processor has it (AVX-512:
// maxwell_kernels_avx512.cpp; AVX2 and NEON: below) over groups of 8, 4 or
// 2 words, finished by the portable loop, which is also the whole
// computation without them and the reference they give the bits of.
#include "lrsuq/maxwell_kernels.hpp"

#include "common/cpu.hpp"
#include "random/maxwell.hpp"

// Everything from here to CEPAM_BASE_LANES_END (maxwell_lanes.hpp included) is
// compiled for the second level (AVX2 on x86-64).
CEPAM_BASE_LANES_BEGIN
#if CEPAM_BASE_LANES
#include "common/lanes_base.hpp"
#include "lrsuq/maxwell_lanes.hpp"

namespace cepam::kernels {
namespace {
std::size_t radii_lanes(double sigma, const std::uint64_t* w, std::size_t count, double* out,
                        std::uint64_t* slow, std::size_t* nslow) {
  return lanes::maxwell_radii<simd::BaseLanes>(sigma, w, count, out, slow, nslow);
}
}  // namespace
}  // namespace cepam::kernels
#endif

CEPAM_BASE_LANES_END

namespace cepam::kernels {

std::size_t maxwell_radii(double sigma, const std::uint64_t* w, std::size_t count, double* out,
                          std::uint64_t* slow) {
  std::size_t c = 0, r = 0;
#if CEPAM_X86_DISPATCH
  if (simd_avx512dq()) c = avx512::maxwell_radii(sigma, w, count, out, slow, &r);
#endif
#if CEPAM_BASE_LANES
  if (simd_base_lanes()) c = radii_lanes(sigma, w, count, out, slow, &r);
#endif
  for (; c < count; ++c) {
    const double x = maxwell::fast(w[c]);
    out[c] = sigma * x;
    slow[r] = c;
    r += x < 0.0 ? 1 : 0;
  }
  return r;
}

}  // namespace cepam::kernels
