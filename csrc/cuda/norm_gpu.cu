// The clip's sum of squares on the device (norm_gpu.hpp): one thread per
// accumulator of a block, running lrsuq/norm_block.hpp's lane(), then
// block_total() on the block's first thread; the host adds the block sums
// by the same tree_sum the CPU runs.
#include "cuda/norm_gpu.hpp"

#include <cuda_runtime.h>

#include <vector>

#include "cuda/runtime.cuh"
#include "lrsuq/norm_block.hpp"

namespace cepam::gpu {
namespace {

constexpr int kBlocksPerCta = 32;
constexpr int kCtaThreads = kBlocksPerCta * squares::kLanes;

template <class T>
__global__ void squares_kernel(const T* x, unsigned long long m, double* sums, double* maxima) {
  __shared__ double acc[kCtaThreads], mx[kCtaThreads];
  const unsigned t = threadIdx.x;
  const int l = static_cast<int>(t % squares::kLanes);
  const unsigned long long b = blockIdx.x * static_cast<unsigned long long>(kBlocksPerCta) +
                               t / squares::kLanes;
  const bool live = b < squares::blocks(m);
  std::size_t lo = 0, count = 0;
  if (live) {
    lo = b * squares::kSquaresBlock;
    count = m - lo < squares::kSquaresBlock ? m - lo : squares::kSquaresBlock;
    squares::lane(x + lo, count, l, &acc[t], &mx[t]);
  }
  __syncthreads();
  if (live && l == 0) squares::block_total(x + lo, count, &acc[t], &mx[t], &sums[b], &maxima[b]);
}

}  // namespace

template <class T>
Squares sum_of_squares(const T* x, std::size_t m, int device, std::uintptr_t stream_id,
                       Timing* timing) {
  const std::size_t k = squares::blocks(m);
  if (k == 0) return {0.0, 0.0};
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  Scratch scratch(device, 2 * k * sizeof(double));
  Timing t;
  Timer kernel_timer(stream), copy_timer(stream);
  kernel_timer.start();
  const unsigned int ctas = static_cast<unsigned int>((k + kBlocksPerCta - 1) / kBlocksPerCta);
  squares_kernel<T><<<ctas, kCtaThreads, 0, stream>>>(x, m, scratch.at<double>(0),
                                                       scratch.at<double>(k * sizeof(double)));
  check(cudaGetLastError(), "launch the sum-of-squares kernel");
  kernel_timer.stop(&t.kernel_ms);
  std::vector<double> sums(k), maxima(k);
  copy_timer.start();
  check(cudaMemcpyAsync(sums.data(), scratch.at<double>(0), k * sizeof(double),
                        cudaMemcpyDeviceToHost, stream), "copy block sums");
  check(cudaMemcpyAsync(maxima.data(), scratch.at<double>(k * sizeof(double)),
                        k * sizeof(double), cudaMemcpyDeviceToHost, stream), "copy block maxima");
  copy_timer.stop(&t.transfer_ms);
  check(cudaStreamSynchronize(stream), "synchronize");
  double maxabs = 0.0;
  for (const double v : maxima) maxabs = v > maxabs ? v : maxabs;
  if (timing != nullptr) *timing = t;
  return {squares::tree_sum(sums.data(), k), maxabs};
}

template Squares sum_of_squares<float>(const float*, std::size_t, int, std::uintptr_t, Timing*);
template Squares sum_of_squares<double>(const double*, std::size_t, int, std::uintptr_t, Timing*);

}  // namespace cepam::gpu
