// The AVX-512 forms of the conditional coder's lane code
// (coding/cell_kernels.hpp): coding/cell_lanes.hpp over the eight-lane
// operations of common/lanes_avx512.hpp.  conditional_coder.cpp calls them
// where simd_avx512dq().
#include "coding/cell_kernels.hpp"

#include <cstring>

#include "coding/conditional_coder.hpp"
#include "common/cpu.hpp"

#if CEPAM_X86_DISPATCH
// (GCC 12's false warnings off for the whole file: common/cpu.hpp.)
CEPAM_AVX512_WARNINGS_OFF
#include <immintrin.h>

// Everything from here on (cell_lanes.hpp included) is compiled for AVX-512.
CEPAM_TARGET_BEGIN("avx512f,avx512dq,avx512vl")
#include "common/lanes_avx512.hpp"
#include "coding/cell_lanes.hpp"

namespace cepam::cell_kernels::avx512 {

std::size_t encode_run(const CellCoder& cells, const SourceModel& model, const std::int64_t* j,
                       const double* g, const double* o, std::size_t count, AnsEncoder& enc,
                       std::size_t* starts) {
  return cell_lanes::encode_run<simd::Avx512Lanes>(cells, model, j, g, o, count, enc, starts);
}

}  // namespace cepam::cell_kernels::avx512

CEPAM_TARGET_END
CEPAM_AVX512_WARNINGS_ON

#endif  // CEPAM_X86_DISPATCH
