// The rANS streams of an ANS body's segments coded on a CUDA device, one
// stream a thread, by the arithmetic the CPU's coder runs
// (coding/rans_core.hpp): the same bytes as AnsEncoder::finish of each
// stream.  Like lrsuq_gpu.hpp this header needs no CUDA headers.
//
// What stays on the CPU: computing the segments' symbols (the source model
// and the conditional coder's tables, coding/conditional_coder.hpp), the
// choice between a segment's box and point model, and padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coding/rans_core.hpp"
#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

// Codes `segments` streams: stream s is symbols[first[s] .. first[s + 1])
// (host memory, first[0] = 0), no padding.  Appends the streams, one after
// another, to out and their byte lengths to sizes.  Throws DeviceError for
// CUDA failures.
void rans_encode_segments(const AnsSymbol* symbols, const std::uint64_t* first,
                          std::size_t segments, int device, std::uintptr_t stream,
                          std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes,
                          Timing* timing);

}  // namespace cepam::gpu
