// A Golomb body coded on a CUDA device from the LRSUQ stage left there
// (cuda/lrsuq_gpu.hpp's encode_lattice_resident), every segment at once in
// units of 256 sub-vectors a thread, by the code the CPU's coder runs
// (coding/golomb_core.hpp): the units' codes counted (with the
// coordinates' bit lengths, from which the host chooses each segment's
// exp-Golomb order), the body laid out on the host from the counts
// (payload/golomb_body.hpp's golomb_plan), then each unit's codes written
// at its bit offsets into the zeroed body, and only the body's bytes come
// back.  Its host twin is golomb_body_by_units.  Like lrsuq_gpu.hpp this
// header needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

// The Golomb body (parameter golomb) of the stage H[N], M[N n] in device
// memory of `device`: golomb_body_by_units's bytes, into body.  Device
// memory besides the stage: 24 bytes a unit, 524 a segment and the body.  Throws
// DeviceError for CUDA failures.  (Not yet run on a GPU: its host twin
// gives the CPU's bodies, tests/core/test_golomb_core.py.)
void golomb_body_resident(std::uint32_t golomb, const std::uint32_t* H, const std::int64_t* M,
                          std::size_t N, int n, int device, std::uintptr_t stream,
                          std::vector<std::uint8_t>& body, Timing* timing);

}  // namespace cepam::gpu
