// The statistics of the entropy coder's source model on a CUDA device
// (coding/model_stats.hpp): the largest magnitude, the range, and the
// per-cell integer counts of x factor, from which the host fits the model
// (SourceModel::fit_from) without seeing x: the CPU's model, bit for bit.
// Like lrsuq_gpu.hpp this header needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "coding/source_model.hpp"
#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

// x[0..m) in device memory of `device`, on `stream`: a kernel reduces x to
// its largest magnitude (the CTAs' maxima combined on the host), the host
// computes the range, a second kernel counts the cells (integer atomics:
// the same counts in any order).  Throws DeviceError for CUDA failures.
template <class T>
SourceModel::Statistics model_statistics(const T* x, std::size_t m, double factor, int device,
                                         std::uintptr_t stream, Timing* timing);

}  // namespace cepam::gpu
