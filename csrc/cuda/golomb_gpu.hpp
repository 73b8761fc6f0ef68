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
// DeviceError for CUDA failures.  (The CPU's bodies on an H200,
// docs/guide/gpu.md, and through its host twin,
// tests/core/test_golomb_core.py.)
void golomb_body_resident(std::uint32_t golomb, const std::uint32_t* H, const std::int64_t* M,
                          std::size_t N, int n, int device, std::uintptr_t stream,
                          std::vector<std::uint8_t>& body, Timing* timing);

// Decodes a Golomb body of len bytes (host memory; the caller checks it
// first: check_payload_body) into y[0..m) (device memory of `device`): the
// host parses the body (payload/golomb_body.hpp's GolombDecodePlan: the
// CPU's FormatError for a malformed one), the device decodes every segment
// at once, a block of threads a segment (payload/golomb_segment.hpp: the
// sections read on one thread, the values on all), and the values stay on
// the device.  Device memory besides y: the body, and for each segment a
// piece's trial indices and coordinates (192 KiB a segment on Z^1, 1.5
// bytes a coordinate; 34 KiB on E8, 0.26).  Throws the CPU decoder's error for the first segment that
// fails, DeviceError for CUDA failures.  The CPU's values on an H200
// (docs/guide/gpu.md); its host twin (decode_golomb_body_by_segments)
// gives the CPU's values and errors (tests/core/test_golomb_segment.py).
template <class T>
void decode_golomb_body_resident(const LrsuqParams& p, const ChaChaKey& key,
                                 const std::uint8_t* body, std::size_t len, std::size_t m,
                                 int device, std::uintptr_t stream, T* y, Timing* timing);

}  // namespace cepam::gpu
