// The host's side of the GPU's whole-body decoders (cuda/ans_gpu.cu,
// cuda/golomb_gpu.cu: a block of threads a segment): the body and the
// segments' descriptions copied to the device, the kernel launched, the
// segments' outcomes brought back, and the first failing segment's error
// thrown as the CPU decoder's (payload/segment_outcome.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/runtime.cuh"
#include "payload/segment_outcome.hpp"

namespace cepam::gpu {

// On `device` and its stream `stream_id`: runs copy(stream) (what else
// the kernel reads: its tables), copies body (len bytes) to d_body and
// segments to d_segments, runs launch(blocks, stream) (one block a
// segment, writing each segment's outcome to d_outcomes), and throws the
// first failing segment's error (values of type `dtype`); the times into
// *timing unless null.  Nothing is in flight when it returns or throws.
template <class Segment, class Copy, class Launch>
void decode_by_blocks(int device, std::uintptr_t stream_id, const std::uint8_t* body,
                      std::size_t len, std::uint8_t* d_body, const std::vector<Segment>& segments,
                      Segment* d_segments, SegmentOutcome* d_outcomes, const char* dtype,
                      Copy&& copy, Launch&& launch, Timing* timing) {
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  const std::size_t S = segments.size();
  std::vector<SegmentOutcome> outcomes(S);
  Timing t;
  Timer copy_timer(stream), kernel_timer(stream);
  try {
    copy_timer.start();
    copy(stream);
    check(cudaMemcpyAsync(d_body, body, len, cudaMemcpyHostToDevice, stream), "copy the body");
    check(cudaMemcpyAsync(d_segments, segments.data(), S * sizeof(Segment),
                          cudaMemcpyHostToDevice, stream),
          "copy the segments");
    copy_timer.stop(&t.transfer_ms);
    kernel_timer.start();
    launch(static_cast<unsigned int>(S), stream);
    check(cudaGetLastError(), "launch the decode kernel");
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(outcomes.data(), d_outcomes, S * sizeof(SegmentOutcome),
                          cudaMemcpyDeviceToHost, stream),
          "copy the outcomes");
    check(cudaStreamSynchronize(stream), "synchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);  // nothing in flight when the buffers go
    throw;
  }
  throw_first_error(outcomes.data(), S, dtype);
  if (timing != nullptr) *timing = t;
}

}  // namespace cepam::gpu
