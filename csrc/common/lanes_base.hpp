// simd::BaseLanes: a kernel's second lane level (CEPAM_BASE_LANES,
// common/cpu.hpp), below its AVX-512 forms: the four-lane AVX2 operations on
// x86-64, the two-lane NEON ones on aarch64: include this, and the lane code
// over it, between CEPAM_BASE_LANES_BEGIN and CEPAM_BASE_LANES_END (an AVX2
// target region on x86-64, none on aarch64).  simd_base_lanes() says where
// they run.
#pragma once

#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
#include "common/lanes_avx2.hpp"
namespace cepam::simd {
using BaseLanes = Avx2Lanes;
}
#elif CEPAM_ARM_NEON
#include "common/lanes_neon.hpp"
namespace cepam::simd {
using BaseLanes = NeonLanes;
}
#endif
