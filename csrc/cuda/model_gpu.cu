// The source model's statistics on the device (model_gpu.hpp): the
// functions of coding/model_stats.hpp one element a thread (the host twin,
// model_stats::by_elements, runs them one element at a time).
#include "cuda/model_gpu.hpp"

#include <cuda_runtime.h>

#include <vector>

#include "coding/model_stats.hpp"
#include "cuda/runtime.cuh"

namespace cepam::gpu {
namespace {

constexpr int kThreads = 256;
// Elements a CTA (256 a thread): its shared counts stay below 2^32, and
// m = 10^8 takes about 1,500 CTAs, enough to fill a GPU.
constexpr std::size_t kPerCta = std::size_t{1} << 16;

template <class T>
__global__ void max_kernel(const T* x, unsigned long long m, T* maxima) {
  __shared__ T mx[kThreads];
  const unsigned long long lo = blockIdx.x * static_cast<unsigned long long>(kPerCta);
  const unsigned long long hi = m - lo < kPerCta ? m : lo + kPerCta;
  T v = 0;
  for (unsigned long long i = lo + threadIdx.x; i < hi; i += kThreads) v = model_stats::abs_max(x[i], v);
  mx[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      mx[threadIdx.x] = model_stats::abs_max(mx[threadIdx.x + half], mx[threadIdx.x]);
    __syncthreads();
  }
  if (threadIdx.x == 0) maxima[blockIdx.x] = mx[0];
}

template <class T>
__global__ void count_kernel(const T* x, unsigned long long m, double factor, double a,
                             double inv_width, unsigned long long* counts) {
  __shared__ unsigned int local[model_stats::kCells];
  for (int c = threadIdx.x; c < model_stats::kCells; c += kThreads) local[c] = 0;
  __syncthreads();
  const unsigned long long lo = blockIdx.x * static_cast<unsigned long long>(kPerCta);
  const unsigned long long hi = m - lo < kPerCta ? m : lo + kPerCta;
  for (unsigned long long i = lo + threadIdx.x; i < hi; i += kThreads)
    atomicAdd(&local[model_stats::cell(x[i], factor, a, inv_width)], 1u);
  __syncthreads();
  for (int c = threadIdx.x; c < model_stats::kCells; c += kThreads)
    if (local[c] != 0) atomicAdd(&counts[c], static_cast<unsigned long long>(local[c]));
}

}  // namespace

template <class T>
SourceModel::Statistics model_statistics(const T* x, std::size_t m, double factor, int device,
                                         std::uintptr_t stream_id, Timing* timing) {
  SourceModel::Statistics stats;
  const std::size_t ctas = (m + kPerCta - 1) / kPerCta;
  if (ctas == 0) {
    stats.range = model_stats::range(0.0, factor);
    return stats;
  }
  DeviceGuard guard(device);
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_id);
  const std::size_t counts_bytes = model_stats::kCells * sizeof(unsigned long long);
  Layout parts;  // the counts, each block's maximum
  const std::size_t off_counts = parts.add(counts_bytes), off_maxima = parts.add(ctas * sizeof(T));
  Scratch scratch(device, parts.bytes());
  unsigned long long* counts = scratch.at<unsigned long long>(off_counts);
  T* maxima = scratch.at<T>(off_maxima);
  Timing t;
  Timer kernel_timer(stream), copy_timer(stream);
  kernel_timer.start();
  max_kernel<T><<<static_cast<unsigned int>(ctas), kThreads, 0, stream>>>(x, m, maxima);
  check(cudaGetLastError(), "launch the model's maximum kernel");
  kernel_timer.stop(&t.kernel_ms);
  std::vector<T> host_maxima(ctas);
  copy_timer.start();
  check(cudaMemcpyAsync(host_maxima.data(), maxima, ctas * sizeof(T), cudaMemcpyDeviceToHost,
                        stream), "copy the maxima");
  copy_timer.stop(&t.transfer_ms);
  check(cudaStreamSynchronize(stream), "synchronize");
  T mx = 0;
  for (const T v : host_maxima) mx = model_stats::abs_max(v, mx);
  stats.range = model_stats::range(static_cast<double>(mx), factor);
  kernel_timer.start();
  check(cudaMemsetAsync(counts, 0, counts_bytes, stream), "clear the counts");
  count_kernel<T><<<static_cast<unsigned int>(ctas), kThreads, 0, stream>>>(
      x, m, factor, stats.range, model_stats::inv_width(stats.range), counts);
  check(cudaGetLastError(), "launch the model's count kernel");
  kernel_timer.stop(&t.kernel_ms);
  static_assert(sizeof(unsigned long long) == sizeof(std::uint64_t));
  copy_timer.start();
  check(cudaMemcpyAsync(stats.counts.data(), counts, counts_bytes, cudaMemcpyDeviceToHost, stream),
        "copy the counts");
  copy_timer.stop(&t.transfer_ms);
  check(cudaStreamSynchronize(stream), "synchronize");
  if (timing != nullptr) *timing = t;
  return stats;
}

template SourceModel::Statistics model_statistics<float>(const float*, std::size_t, double, int,
                                                         std::uintptr_t, Timing*);
template SourceModel::Statistics model_statistics<double>(const double*, std::size_t, double, int,
                                                          std::uintptr_t, Timing*);

}  // namespace cepam::gpu
