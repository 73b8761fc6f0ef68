// The rANS encoder's groups (coding/rans_core.hpp's RansRun) for several
// runs at once with AVX-512 (coding/rans_avx512.cpp), for CPUs with AVX-512
// F, DQ and VL (simd_avx512dq()); AnsEncoder::finish_together calls it.
// Internal header.
#pragma once

#include <cstddef>

#include "coding/rans_core.hpp"

namespace cepam::rans_kernels::avx512 {

// Codes `groups` groups of each of the k = 2 or 4 runs (every run has that
// many left), two runs' four states a register, the registers' chains side
// by side: the same states and words as RansRun::group, whose lanes these
// are (advanced in place).  Each group stores four words at a run's cursor
// whatever it emits (the buffer has room: at most one word a symbol is
// emitted, and four symbols are left).
void encode_groups(RansRun::Lanes* runs, std::size_t k, std::size_t groups);

}  // namespace cepam::rans_kernels::avx512
