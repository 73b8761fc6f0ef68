// CUDA kernels of the LRSUQ stage (lrsuq_gpu.hpp): one thread per
// sub-vector, each running lrsuq/subvector.hpp's encode_one / decode_one,
// the functions the CPU tests check against the CPU codec bit for bit.
// Compiled with --fmad=false and without fast-math (CMakeLists.txt).
#include "cuda/lrsuq_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/runtime.cuh"
#include "lrsuq/subvector.hpp"

namespace cepam::gpu {
namespace {

// Sub-vectors per launch (kDefaultChunk): bounds the device scratch (H, M,
// beta, V) to (12 + 16 n) bytes times this, 29 MB for n = 1 and 141 MB for
// n = 8.
constexpr int kThreads = 256;
constexpr unsigned long long kNoFailure = std::numeric_limits<unsigned long long>::max();

struct Key {
  std::uint32_t w[8];
};

Key key_words(const ChaChaKey& key) {
  Key k{};
  for (int i = 0; i < 8; ++i) k.w[i] = key[static_cast<std::size_t>(i)];
  return k;
}

// The first failure of a launch: (sub-vector << 3) | status, the smallest.
__device__ inline void record_failure(unsigned long long* first, unsigned long long j,
                                      subvector::Status s) {
  atomicMin(first, (j << 3) | static_cast<unsigned long long>(s));
}

template <class T>
__global__ void encode_kernel(subvector::Config c, Key key, const T* x, unsigned long long m,
                              double factor, unsigned long long first, unsigned long long count,
                              std::uint32_t* H, std::int64_t* M, double* beta, double* V,
                              unsigned long long* failure) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    const unsigned long long n = static_cast<unsigned long long>(c.n);
    const subvector::Status s = subvector::encode_one(c, key.w, x, m, factor, first + i, H + i,
                                                      M + i * n, beta + i, V + i * n);
    if (s != subvector::kOk) record_failure(failure, first + i, s);
  }
}

template <class T>
__global__ void decode_kernel(subvector::Config c, Key key, const std::uint32_t* H,
                              const std::int64_t* M, unsigned long long m,
                              unsigned long long first, unsigned long long count, T* y,
                              unsigned long long* failure) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    const unsigned long long n = static_cast<unsigned long long>(c.n);
    const subvector::Status s = subvector::decode_one(c, key.w, H[i], M + i * n, m, first + i, y);
    if (s != subvector::kOk) record_failure(failure, first + i, s);
  }
}

unsigned int blocks_for(std::size_t count) {
  const std::size_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::min<std::size_t>(b, 65535u * 32u));
}

// Reads the launch's failure word and throws the codec's error for it.
void throw_on_failure(const unsigned long long* failure_dev, cudaStream_t stream,
                      const subvector::Config& c, const std::uint32_t* H_host,
                      std::size_t first, const char* output_type = "the output type") {
  unsigned long long failure = kNoFailure;
  check(cudaMemcpyAsync(&failure, failure_dev, sizeof failure, cudaMemcpyDeviceToHost, stream),
        "copy failure flag");
  check(cudaStreamSynchronize(stream), "synchronize");
  if (failure == kNoFailure) return;
  const std::size_t j = static_cast<std::size_t>(failure >> 3);
  const int status = static_cast<int>(failure & 7u);
  if (status == subvector::kNonFiniteOutput) throw_nonfinite_output(j, output_type);
  throw_subvector_error(j, status, c.limit, H_host != nullptr ? H_host[j - first] : 0u);
}

// What an encode and a decode call set up alike: the sub-vector
// configuration, the number of sub-vectors N (n coordinates each, the last
// padded), the device (current for the call's lifetime), the stream, the
// sub-vectors per launch and the kernel and transfer timers.
struct Launch {
  Launch(const LrsuqParams& p, std::size_t m, int device, std::uintptr_t stream_id,
         std::size_t per_launch)
      : c(lrsuq_subvector_config(p)),
        un(static_cast<std::size_t>(p.n)),
        N((m + un - 1) / un),
        guard(device),
        stream(reinterpret_cast<cudaStream_t>(stream_id)),
        chunk(std::min(per_launch != 0 ? per_launch : kDefaultChunk, std::max<std::size_t>(N, 1))),
        kernel_timer(stream),
        copy_timer(stream) {}

  const subvector::Config c;
  const std::size_t un, N;
  DeviceGuard guard;
  const cudaStream_t stream;
  const std::size_t chunk;
  Timer kernel_timer, copy_timer;
};

}  // namespace

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why != nullptr) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky error of a missing driver
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "no CUDA device";
  return count;
}

int device_of(const void* ptr) {
  cudaPointerAttributes attr{};
  check(cudaPointerGetAttributes(&attr, ptr), "pointer attributes");
  return (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) ? attr.device
                                                                                   : -1;
}

void* device_alloc(int device, std::size_t bytes) {
  DeviceGuard guard(device);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "allocate device memory");
  return p;
}

void device_free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  cudaFree(ptr);
  cudaSetDevice(previous);
}

template <class T>
void encode_lattice(const LrsuqParams& p, const ChaChaKey& key, const T* x, std::size_t m,
                    double factor, int device, std::uintptr_t stream_id, std::uint32_t* H,
                    std::int64_t* M, double* beta, double* V, Timing* timing,
                    std::size_t chunk) {
  check_factor(factor);
  Launch L(p, m, device, stream_id, chunk);
  // Layout: failure word, H, beta, M, V (8-byte fields first after H's padding).
  const std::size_t off_h = 8, off_beta = off_h + ((L.chunk * 4 + 7) / 8) * 8;
  const std::size_t off_m = off_beta + L.chunk * 8, off_v = off_m + L.chunk * L.un * 8;
  Scratch scratch(device, off_v + L.chunk * L.un * 8);
  auto* failure = scratch.at<unsigned long long>(0);
  Timing t;
  const Key k = key_words(key);
  for (std::size_t first = 0; first < L.N; first += L.chunk) {
    const std::size_t count = std::min(L.chunk, L.N - first);
    check(cudaMemcpyAsync(failure, &kNoFailure, sizeof kNoFailure, cudaMemcpyHostToDevice,
                          L.stream),
          "reset failure flag");
    L.kernel_timer.start();
    encode_kernel<T><<<blocks_for(count), kThreads, 0, L.stream>>>(
        L.c, k, x, m, factor, first, count, scratch.at<std::uint32_t>(off_h),
        scratch.at<std::int64_t>(off_m), scratch.at<double>(off_beta), scratch.at<double>(off_v),
        failure);
    check(cudaGetLastError(), "launch the encode kernel");
    L.kernel_timer.stop(&t.kernel_ms);
    throw_on_failure(failure, L.stream, L.c, nullptr, first);
    L.copy_timer.start();
    check(cudaMemcpyAsync(H + first, scratch.at<std::uint32_t>(off_h), count * 4,
                          cudaMemcpyDeviceToHost, L.stream), "copy H");
    check(cudaMemcpyAsync(beta + first, scratch.at<double>(off_beta), count * 8,
                          cudaMemcpyDeviceToHost, L.stream), "copy beta");
    check(cudaMemcpyAsync(M + first * L.un, scratch.at<std::int64_t>(off_m), count * L.un * 8,
                          cudaMemcpyDeviceToHost, L.stream), "copy M");
    check(cudaMemcpyAsync(V + first * L.un, scratch.at<double>(off_v), count * L.un * 8,
                          cudaMemcpyDeviceToHost, L.stream), "copy V");
    L.copy_timer.stop(&t.transfer_ms);
  }
  if (timing != nullptr) *timing = t;
}

template <class T>
void decode_lattice(const LrsuqParams& p, const ChaChaKey& key, const std::uint32_t* H,
                    const std::int64_t* M, std::size_t m, int device, std::uintptr_t stream_id,
                    T* y, Timing* timing, std::size_t chunk) {
  Launch L(p, m, device, stream_id, chunk);
  const std::size_t off_m = 8, off_h = off_m + L.chunk * L.un * 8;
  Scratch scratch(device, off_h + L.chunk * 4);
  auto* failure = scratch.at<unsigned long long>(0);
  Timing t;
  const Key k = key_words(key);
  for (std::size_t first = 0; first < L.N; first += L.chunk) {
    const std::size_t count = std::min(L.chunk, L.N - first);
    L.copy_timer.start();
    check(cudaMemcpyAsync(scratch.at<std::uint32_t>(off_h), H + first, count * 4,
                          cudaMemcpyHostToDevice, L.stream), "copy H");
    check(cudaMemcpyAsync(scratch.at<std::int64_t>(off_m), M + first * L.un, count * L.un * 8,
                          cudaMemcpyHostToDevice, L.stream), "copy M");
    check(cudaMemcpyAsync(failure, &kNoFailure, sizeof kNoFailure, cudaMemcpyHostToDevice,
                          L.stream),
          "reset failure flag");
    L.copy_timer.stop(&t.transfer_ms);
    L.kernel_timer.start();
    decode_kernel<T><<<blocks_for(count), kThreads, 0, L.stream>>>(
        L.c, k, scratch.at<std::uint32_t>(off_h), scratch.at<std::int64_t>(off_m), m, first, count,
        y, failure);
    check(cudaGetLastError(), "launch the decode kernel");
    L.kernel_timer.stop(&t.kernel_ms);
    throw_on_failure(failure, L.stream, L.c, H + first, first, dtype_name<T>());
  }
  if (timing != nullptr) *timing = t;
}

template void encode_lattice<float>(const LrsuqParams&, const ChaChaKey&, const float*,
                                    std::size_t, double, int, std::uintptr_t, std::uint32_t*,
                                    std::int64_t*, double*, double*, Timing*, std::size_t);
template void encode_lattice<double>(const LrsuqParams&, const ChaChaKey&, const double*,
                                     std::size_t, double, int, std::uintptr_t, std::uint32_t*,
                                     std::int64_t*, double*, double*, Timing*, std::size_t);
template void decode_lattice<float>(const LrsuqParams&, const ChaChaKey&, const std::uint32_t*,
                                    const std::int64_t*, std::size_t, int, std::uintptr_t,
                                    float*, Timing*, std::size_t);
template void decode_lattice<double>(const LrsuqParams&, const ChaChaKey&, const std::uint32_t*,
                                     const std::int64_t*, std::size_t, int, std::uintptr_t,
                                     double*, Timing*, std::size_t);

}  // namespace cepam::gpu
