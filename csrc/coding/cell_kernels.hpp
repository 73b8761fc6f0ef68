// The AVX-512 forms of the coder's lane code (coding/conditional_coder_avx512.cpp),
// for CPUs with AVX-512 F, DQ and VL (simd_avx512dq()); the AVX2 forms are
// in coding/conditional_coder.cpp.  Internal header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/conditional_coder.hpp"

namespace cepam::cell_kernels::avx512 {

// CellCoder::encode_batch's coordinates [0, count - count mod 8), eight at
// a time (coding/cell_lanes.hpp's encode_run); returns how many it coded.
std::size_t encode_run(const CellCoder& cells, const SourceModel& model, const std::int64_t* j,
                       const double* g, const double* o, std::size_t count, AnsEncoder& enc,
                       std::size_t* starts);

}  // namespace cepam::cell_kernels::avx512
