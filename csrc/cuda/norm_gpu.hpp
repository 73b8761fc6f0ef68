// The first pass of the clip's sum of squares on a CUDA device, by the
// block order of lrsuq/norm_block.hpp (format version 5): the same bits as
// the host's squares::sum_by_blocks.  Like lrsuq_gpu.hpp this header needs
// no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

struct Squares {
  double total;   // the tree sum of the block sums (may be inf or NaN)
  double maxabs;  // the largest magnitude
};

// x[0..m) in device memory of `device`, on `stream`: the kernel sums the
// blocks (four threads a block, one accumulator each), the host adds the
// block sums by the tree.  A total that is not finite or is below 2^-900
// asks for the caller's second pass (lrsuq/norm.hpp: NaN, Inf, overflow,
// underflow).  Throws DeviceError for CUDA failures.
template <class T>
Squares sum_of_squares(const T* x, std::size_t m, int device, std::uintptr_t stream,
                       Timing* timing);

}  // namespace cepam::gpu
