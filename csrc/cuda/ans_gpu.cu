// The rANS streams of an ANS body's segments on the device (ans_gpu.hpp):
// one stream a thread, each running coding/rans_core.hpp's
// rans_encode_stream, the function the CPU's AnsEncoder runs (the host
// tests check the two flows bit for bit: tests/core/test_rans_core.py).
#include "cuda/ans_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"
#include "cuda/runtime.cuh"

namespace cepam::gpu {
namespace {

constexpr int kStreamThreads = 64;

// Stream s of the launch: its symbols, scratch words and room in out
// (offsets as rans_encode_segments takes them); its length in sizes[s],
// and *failed set to 1 if its room was too small (never, by the room given).
__global__ void rans_segments_kernel(const AnsSymbol* symbols, const std::uint64_t* first,
                                     unsigned long long segments, std::uint32_t* words,
                                     std::uint8_t* out, const std::uint64_t* out_first,
                                     std::uint64_t* sizes, int* failed) {
  const unsigned long long s = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (s >= segments) return;
  std::size_t size = 0;
  const RansStatus st = rans_encode_stream(
      symbols + first[s], static_cast<std::size_t>(first[s + 1] - first[s]), 0, words + first[s],
      out + out_first[s], static_cast<std::size_t>(out_first[s + 1] - out_first[s]), &size);
  sizes[s] = size;
  if (st != kRansOk) atomicExch(failed, 1);
}

}  // namespace

void rans_encode_segments(const AnsSymbol* symbols, const std::uint64_t* first,
                          std::size_t segments, int device, std::uintptr_t stream_id,
                          std::vector<std::uint8_t>& out, std::vector<std::uint64_t>& sizes,
                          Timing* timing) {
  if (segments == 0) return;
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  const std::size_t total = static_cast<std::size_t>(first[segments]);
  // Each stream's room: its largest possible length.
  std::vector<std::uint64_t> out_first(segments + 1, 0);
  for (std::size_t s = 0; s < segments; ++s) {
    if (first[s + 1] < first[s]) throw InvalidArgument("segment offsets must not decrease");
    out_first[s + 1] = out_first[s] + rans_max_stream_bytes(first[s + 1] - first[s]);
  }
  const std::size_t room = static_cast<std::size_t>(out_first[segments]);
  // Layout: failure flag, offsets, room offsets, sizes, symbols, words, out.
  const std::size_t off_first = 8, off_out_first = off_first + (segments + 1) * 8;
  const std::size_t off_sizes = off_out_first + (segments + 1) * 8;
  const std::size_t off_symbols = off_sizes + segments * 8;
  const std::size_t off_words = off_symbols + total * sizeof(AnsSymbol);
  const std::size_t off_out = off_words + ((total * 4 + 7) / 8) * 8;
  Scratch scratch(device, off_out + room);
  Timing t;
  Timer copy_timer(stream), kernel_timer(stream);
  const int zero = 0;
  copy_timer.start();
  check(cudaMemcpyAsync(scratch.at<int>(0), &zero, sizeof zero, cudaMemcpyHostToDevice, stream),
        "reset failure flag");
  check(cudaMemcpyAsync(scratch.at<std::uint64_t>(off_first), first, (segments + 1) * 8,
                        cudaMemcpyHostToDevice, stream), "copy segment offsets");
  check(cudaMemcpyAsync(scratch.at<std::uint64_t>(off_out_first), out_first.data(),
                        (segments + 1) * 8, cudaMemcpyHostToDevice, stream), "copy room offsets");
  check(cudaMemcpyAsync(scratch.at<AnsSymbol>(off_symbols), symbols, total * sizeof(AnsSymbol),
                        cudaMemcpyHostToDevice, stream), "copy symbols");
  copy_timer.stop(&t.transfer_ms);
  kernel_timer.start();
  const unsigned int blocks =
      static_cast<unsigned int>((segments + kStreamThreads - 1) / kStreamThreads);
  rans_segments_kernel<<<blocks, kStreamThreads, 0, stream>>>(
      scratch.at<AnsSymbol>(off_symbols), scratch.at<std::uint64_t>(off_first),
      segments, scratch.at<std::uint32_t>(off_words), scratch.at<std::uint8_t>(off_out),
      scratch.at<std::uint64_t>(off_out_first), scratch.at<std::uint64_t>(off_sizes),
      scratch.at<int>(0));
  check(cudaGetLastError(), "launch the rANS kernel");
  kernel_timer.stop(&t.kernel_ms);
  int failed = 0;
  const std::size_t base = sizes.size();
  sizes.resize(base + segments);
  std::vector<std::uint8_t> streams(room);
  copy_timer.start();
  check(cudaMemcpyAsync(&failed, scratch.at<int>(0), sizeof failed, cudaMemcpyDeviceToHost,
                        stream), "copy failure flag");
  check(cudaMemcpyAsync(sizes.data() + base, scratch.at<std::uint64_t>(off_sizes), segments * 8,
                        cudaMemcpyDeviceToHost, stream), "copy stream sizes");
  check(cudaMemcpyAsync(streams.data(), scratch.at<std::uint8_t>(off_out), room,
                        cudaMemcpyDeviceToHost, stream), "copy streams");
  copy_timer.stop(&t.transfer_ms);
  check(cudaStreamSynchronize(stream), "synchronize");
  if (failed != 0) throw DeviceError("rANS kernel: a stream overran its room");
  for (std::size_t s = 0; s < segments; ++s) {
    const std::uint8_t* p = streams.data() + out_first[s];
    out.insert(out.end(), p, p + sizes[base + s]);
  }
  if (timing != nullptr) *timing = t;
}

}  // namespace cepam::gpu
