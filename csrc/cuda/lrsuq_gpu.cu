// CUDA kernels of the LRSUQ stage (lrsuq_gpu.hpp): one thread per
// sub-vector, each running lrsuq/subvector.hpp's encode_one / decode_one,
// the functions the CPU tests check against the CPU codec bit for bit.
// Compiled with --fmad=false and without fast-math (CMakeLists.txt).
#include "cuda/lrsuq_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "cuda/runtime.cuh"
#include "lrsuq/compact.hpp"
#include "lrsuq/subvector.hpp"

namespace cepam::gpu {
namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kNoFailure = std::numeric_limits<unsigned long long>::max();

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

// A chunk's failure word and range (compact.hpp), on the device.
struct ChunkRange {
  unsigned long long failure;
  unsigned long long h_max;
  long long m_lo, m_hi;
};

__global__ void reset_range_kernel(ChunkRange* r) {
  r->failure = kNoFailure;
  r->h_max = 0;
  r->m_lo = 0;
  r->m_hi = 0;
}

// The largest H and the extreme M of a chunk (the same values as
// compact::range_of): each block reduces its threads' values in shared
// memory, and only its thread 0 updates r, three atomics a block.  (It
// used three atomics a thread, on the same three words: on an H200 the
// chunked stage, the encode kernel and this one, then ran at 431 M
// coordinates/s where the resident stage, the encode kernel alone, ran at
// about 11,000; bench/gpu_check.py, m = 10^8.  Not yet timed on a GPU in
// this form.)  Launched with kThreads threads a block.
__global__ void range_kernel(const std::uint32_t* H, unsigned long long count,
                             const std::int64_t* M, unsigned long long coords, ChunkRange* r) {
  __shared__ unsigned long long h_max[kThreads];
  __shared__ long long lo[kThreads], hi[kThreads];
  const unsigned t = threadIdx.x;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long start = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + t;
  unsigned long long h = 0;
  long long l = 0, u = 0;
  for (unsigned long long i = start; i < count; i += stride) h = H[i] > h ? H[i] : h;
  for (unsigned long long i = start; i < coords; i += stride) {
    l = M[i] < l ? M[i] : l;
    u = M[i] > u ? M[i] : u;
  }
  h_max[t] = h;
  lo[t] = l;
  hi[t] = u;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      h_max[t] = h_max[t + half] > h_max[t] ? h_max[t + half] : h_max[t];
      lo[t] = lo[t + half] < lo[t] ? lo[t + half] : lo[t];
      hi[t] = hi[t + half] > hi[t] ? hi[t + half] : hi[t];
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicMax(&r->h_max, h_max[0]);
    atomicMin(&r->m_lo, lo[0]);
    atomicMax(&r->m_hi, hi[0]);
  }
}

// H and M of a chunk at widths wh and wm (compact.hpp).
__global__ void pack_kernel(const std::uint32_t* H, unsigned long long count,
                            const std::int64_t* M, unsigned long long coords, int wh, int wm,
                            void* h_out, void* m_out) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long start = blockIdx.x * static_cast<unsigned long long>(blockDim.x) +
                                   threadIdx.x;
  for (unsigned long long i = start; i < count; i += stride) compact::PackedUnsigned::put(h_out, i, wh, H[i]);
  for (unsigned long long i = start; i < coords; i += stride) compact::PackedSigned::put(m_out, i, wm, M[i]);
}

// The inverse of pack_kernel (compact.hpp).
__global__ void unpack_kernel(const void* h_in, unsigned long long count, const void* m_in,
                              unsigned long long coords, int wh, int wm, std::uint32_t* H,
                              std::int64_t* M) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long start = blockIdx.x * static_cast<unsigned long long>(blockDim.x) +
                                   threadIdx.x;
  for (unsigned long long i = start; i < count; i += stride)
    H[i] = static_cast<std::uint32_t>(compact::PackedUnsigned::get(h_in, i, wh));
  for (unsigned long long i = start; i < coords; i += stride) M[i] = compact::PackedSigned::get(m_in, i, wm);
}

unsigned int blocks_for(std::size_t count) {
  const std::size_t b = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::min<std::size_t>(b, 65535u * 32u));
}

// Throws the codec's error for a launch's failure word (nothing for
// kNoFailure).
void throw_failure(unsigned long long failure, const subvector::Config& c,
                   const std::uint32_t* H_host, std::size_t first,
                   const char* output_type = "the output type") {
  if (failure == kNoFailure) return;
  const std::size_t j = static_cast<std::size_t>(failure >> 3);
  const int status = static_cast<int>(failure & 7u);
  if (status == subvector::kNonFiniteOutput) throw_nonfinite_output(j, output_type);
  throw_subvector_error(j, status, c.limit, H_host != nullptr ? H_host[j - first] : 0u);
}

// What an encode and a decode call set up alike: the sub-vector
// configuration, the number of sub-vectors N (n coordinates each, the last
// padded), the device (current for the call's lifetime), the stream and
// the sub-vectors per launch C (by default 2^20 coordinates' worth, so
// that the buffers do not grow with n: an encode's two slots hold
// 2 C (16 + 24 n) bytes of device scratch and 2 C (12 + 16 n) of
// page-locked host memory, 80 and 56 MiB on Z^1, 52 and 35 MiB on E8; a
// decode's, less).
struct Launch {
  Launch(const LrsuqParams& p, std::size_t m, int device, std::uintptr_t stream_id,
         std::size_t per_launch)
      : c(lrsuq_subvector_config(p)),
        un(static_cast<std::size_t>(p.n)),
        N((m + un - 1) / un),
        guard(device),
        stream(reinterpret_cast<cudaStream_t>(stream_id)),
        chunk(std::min(per_launch != 0 ? per_launch
                                       : std::max<std::size_t>(1, kDefaultChunkCoordinates / un),
                       std::max<std::size_t>(N, 1))) {}

  const subvector::Config c;
  const std::size_t un, N;
  DeviceGuard guard;
  const cudaStream_t stream;
  const std::size_t chunk;
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

void copy_to_host(int device, void* host, const void* ptr, std::size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemcpy(host, ptr, bytes, cudaMemcpyDeviceToHost), "copy to the host");
}

void device_free(int device, void* ptr) noexcept {
  if (ptr == nullptr) return;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  cudaFree(ptr);
  cudaSetDevice(previous);
}

// The encoder's pipeline, chunk by chunk through two slots (device scratch
// and page-locked staging each), on the caller's stream:
//   E(c): the LRSUQ kernel, the chunk's range, the range to the host;
//   P(c): H and M packed at the narrowest widths of their range
//         (compact.hpp), then H, M, beta and V to the host;
//   W(c): the host widens H and M into the outputs and copies beta and V
//         (on `threads` threads).
// Iteration c enqueues E(c) and (once E(c-1)'s range is on the host)
// P(c-1), then runs W(c-2) while the device works: the host's work
// overlaps the device's.  A slot's device scratch is reused by E(c + 2),
// enqueued after P(c); its staging by P(c + 2), after W(c).
template <class T>
void encode_lattice(const LrsuqParams& p, const ChaChaKey& key, const T* x, std::size_t m,
                    double factor, int device, std::uintptr_t stream_id, std::uint32_t* H,
                    std::int64_t* M, double* beta, double* V, Timing* timing,
                    std::size_t chunk, int threads) {
  check_factor(factor);
  Launch L(p, m, device, stream_id, chunk);
  const std::size_t C = L.chunk, Cn = C * L.un;
  // Device slot: range, H, beta, M, V, packed H, packed M.
  Layout ds;
  const std::size_t d_range = ds.add(sizeof(ChunkRange)), d_h = ds.add(C * 4);
  const std::size_t d_beta = ds.add(C * 8), d_m = ds.add(Cn * 8), d_v = ds.add(Cn * 8);
  const std::size_t d_ph = ds.add(C * 4), d_pm = ds.add(Cn * 8), d_slot = ds.bytes();
  // Host slot: range, packed H, packed M, beta, V.
  Layout hs;
  const std::size_t h_range = hs.add(sizeof(ChunkRange)), h_ph = hs.add(C * 4);
  const std::size_t h_pm = hs.add(Cn * 8), h_beta = hs.add(C * 8), h_v = hs.add(Cn * 8);
  const std::size_t h_slot = hs.bytes();
  Scratch scratch(device, 2 * d_slot);
  Pinned staging(2 * h_slot);
  struct Slot {
    int wh = 4, wm = 8;    // the widths of P's chunk, for W's
    Event e0, e1, p0, p1;  // around E and P
  } slots[2];
  const auto first_of = [&](std::size_t c) { return c * C; };
  const auto count_of = [&](std::size_t c) { return std::min(C, L.N - c * C); };
  const auto dev = [&](int s, std::size_t off) { return scratch.at<char>(s * d_slot + off); };
  const auto host = [&](int s, std::size_t off) { return staging.at<char>(s * h_slot + off); };
  Timing t;
  const Key k = key_words(key);
  const auto enqueue_e = [&](std::size_t c) {
    const int s = static_cast<int>(c % 2);
    Slot& sl = slots[s];
    const std::size_t first = first_of(c), count = count_of(c);
    auto* range = reinterpret_cast<ChunkRange*>(dev(s, d_range));
    sl.e0.record(L.stream);
    reset_range_kernel<<<1, 1, 0, L.stream>>>(range);
    encode_kernel<T><<<blocks_for(count), kThreads, 0, L.stream>>>(
        L.c, k, x, m, factor, first, count, reinterpret_cast<std::uint32_t*>(dev(s, d_h)),
        reinterpret_cast<std::int64_t*>(dev(s, d_m)), reinterpret_cast<double*>(dev(s, d_beta)),
        reinterpret_cast<double*>(dev(s, d_v)), &range->failure);
    range_kernel<<<blocks_for(count * L.un), kThreads, 0, L.stream>>>(
        reinterpret_cast<std::uint32_t*>(dev(s, d_h)), count,
        reinterpret_cast<std::int64_t*>(dev(s, d_m)), count * L.un, range);
    check(cudaGetLastError(), "launch the encode kernels");
    check(cudaMemcpyAsync(host(s, h_range), range, sizeof(ChunkRange), cudaMemcpyDeviceToHost,
                          L.stream), "copy the chunk's range");
    sl.e1.record(L.stream);
  };
  const auto enqueue_p = [&](std::size_t c) {
    const int s = static_cast<int>(c % 2);
    Slot& sl = slots[s];
    const std::size_t count = count_of(c);
    sl.e1.wait();
    t.kernel_ms += sl.e1.since(sl.e0);
    const ChunkRange* r = reinterpret_cast<const ChunkRange*>(host(s, h_range));
    throw_failure(r->failure, L.c, nullptr, first_of(c));
    sl.wh = compact::unsigned_width(r->h_max);
    sl.wm = compact::signed_width(r->m_lo, r->m_hi);
    const std::size_t coords = count * L.un;
    sl.p0.record(L.stream);
    pack_kernel<<<blocks_for(coords), kThreads, 0, L.stream>>>(
        reinterpret_cast<std::uint32_t*>(dev(s, d_h)), count,
        reinterpret_cast<std::int64_t*>(dev(s, d_m)), coords, sl.wh, sl.wm, dev(s, d_ph),
        dev(s, d_pm));
    check(cudaGetLastError(), "launch the pack kernel");
    check(cudaMemcpyAsync(host(s, h_ph), dev(s, d_ph), count * static_cast<std::size_t>(sl.wh),
                          cudaMemcpyDeviceToHost, L.stream), "copy H");
    check(cudaMemcpyAsync(host(s, h_pm), dev(s, d_pm), coords * static_cast<std::size_t>(sl.wm),
                          cudaMemcpyDeviceToHost, L.stream), "copy M");
    check(cudaMemcpyAsync(host(s, h_beta), dev(s, d_beta), count * 8, cudaMemcpyDeviceToHost,
                          L.stream), "copy beta");
    check(cudaMemcpyAsync(host(s, h_v), dev(s, d_v), coords * 8, cudaMemcpyDeviceToHost,
                          L.stream), "copy V");
    sl.p1.record(L.stream);
  };
  const auto widen = [&](std::size_t c) {
    const int s = static_cast<int>(c % 2);
    Slot& sl = slots[s];
    const std::size_t first = first_of(c), count = count_of(c), coords = count * L.un;
    sl.p1.wait();
    t.transfer_ms += sl.p1.since(sl.p0);
    // H and M widened, beta and V copied, part by part on the threads.
    const char* ph = host(s, h_ph);
    const char* pm = host(s, h_pm);
    const double* pb = reinterpret_cast<const double*>(host(s, h_beta));
    const double* pv = reinterpret_cast<const double*>(host(s, h_v));
    compact::for_parts(count, coords, threads, [&](std::size_t, std::size_t h0, std::size_t h1,
                                                   std::size_t m0, std::size_t m1) {
      compact::unpack(ph + h0 * sl.wh, h1 - h0, pm + m0 * sl.wm, m1 - m0, sl.wh, sl.wm,
                      H + first + h0, M + first * L.un + m0);
      std::memcpy(beta + first + h0, pb + h0, (h1 - h0) * 8);
      std::memcpy(V + first * L.un + m0, pv + m0, (m1 - m0) * 8);
    });
  };
  const std::size_t chunks = (L.N + C - 1) / C;
  try {
    for (std::size_t c = 0; c < chunks + 2; ++c) {
      if (c < chunks) enqueue_e(c);
      if (c >= 1 && c - 1 < chunks) enqueue_p(c - 1);
      if (c >= 2) widen(c - 2);
    }
  } catch (...) {
    cudaStreamSynchronize(L.stream);  // nothing in flight when the buffers go
    throw;
  }
  check(cudaStreamSynchronize(L.stream), "synchronize");
  if (timing != nullptr) *timing = t;
}

// The stage left on the device: every chunk's kernel writes into the
// caller's buffers, one failure word for all (atomicMin: the first failing
// sub-vector of the update, as the CPU reports it).
template <class T>
void encode_lattice_resident(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                             std::size_t m, double factor, int device, std::uintptr_t stream_id,
                             std::uint32_t* H, std::int64_t* M, double* beta, double* V,
                             Timing* timing, std::size_t chunk) {
  check_factor(factor);
  Launch L(p, m, device, stream_id, chunk);
  Scratch scratch(device, sizeof(unsigned long long));
  auto* failure = scratch.at<unsigned long long>(0);
  const Key k = key_words(key);
  Timing t;
  Timer kernel_timer(L.stream);
  unsigned long long first_failure = kNoFailure;
  try {
    check(cudaMemcpyAsync(failure, &first_failure, sizeof first_failure, cudaMemcpyHostToDevice,
                          L.stream), "reset the failure word");
    kernel_timer.start();
    for (std::size_t first = 0; first < L.N; first += L.chunk) {
      const std::size_t count = std::min(L.chunk, L.N - first);
      encode_kernel<T><<<blocks_for(count), kThreads, 0, L.stream>>>(
          L.c, k, x, m, factor, first, count, H + first, M + first * L.un, beta + first,
          V + first * L.un, failure);
      check(cudaGetLastError(), "launch the encode kernel");
    }
    kernel_timer.stop(&t.kernel_ms);
    check(cudaMemcpyAsync(&first_failure, failure, sizeof first_failure, cudaMemcpyDeviceToHost,
                          L.stream), "copy the failure word");
  } catch (...) {
    cudaStreamSynchronize(L.stream);  // nothing in flight when the buffers go
    throw;
  }
  check(cudaStreamSynchronize(L.stream), "synchronize");
  throw_failure(first_failure, L.c, nullptr, 0);
  if (timing != nullptr) *timing = t;
}

// The decoder's pipeline, chunk by chunk through two slots: the host packs
// a chunk's H and M at the narrowest widths of their range (compact.hpp)
// into page-locked staging (on `threads` threads), the device copies them,
// widens them (unpack kernel) and decodes; the host packs chunk c + 1
// while the device works on chunk c.  A slot is reused once its chunk's
// decode has completed.
template <class T>
void decode_lattice(const LrsuqParams& p, const ChaChaKey& key, const std::uint32_t* H,
                    const std::int64_t* M, std::size_t m, int device, std::uintptr_t stream_id,
                    T* y, Timing* timing, std::size_t chunk, int threads) {
  Launch L(p, m, device, stream_id, chunk);
  const std::size_t C = L.chunk, Cn = C * L.un;
  // Device slot: failure word, H, M, packed H, packed M.  Host slot:
  // failure word, packed H, packed M.
  Layout ds, hs;
  const std::size_t d_failure = ds.add(8), d_h = ds.add(C * 4), d_m = ds.add(Cn * 8);
  const std::size_t d_ph = ds.add(C * 4), d_pm = ds.add(Cn * 8), d_slot = ds.bytes();
  const std::size_t h_failure = hs.add(8), h_ph = hs.add(C * 4), h_pm = hs.add(Cn * 8);
  const std::size_t h_slot = hs.bytes();
  Scratch scratch(device, 2 * d_slot);
  Pinned staging(2 * h_slot);
  struct Slot {
    Event c0, c1, k1;  // the copies (c0 to c1), the kernels (c1 to k1)
    bool busy = false;
  } slots[2];
  const auto dev = [&](int s, std::size_t off) { return scratch.at<char>(s * d_slot + off); };
  const auto host = [&](int s, std::size_t off) { return staging.at<char>(s * h_slot + off); };
  const auto failure_word = [&](int s) {
    return reinterpret_cast<unsigned long long*>(host(s, h_failure));
  };
  Timing t;
  const Key k = key_words(key);
  // Waits for the slot's chunk c and throws its failure, if any.
  const auto finish = [&](std::size_t c) {
    Slot& sl = slots[c % 2];
    if (!sl.busy) return;
    sl.busy = false;
    sl.k1.wait();
    t.transfer_ms += sl.c1.since(sl.c0);
    t.kernel_ms += sl.k1.since(sl.c1);
    throw_failure(*failure_word(static_cast<int>(c % 2)), L.c, H + c * C, c * C, dtype_name<T>());
  };
  const std::size_t chunks = (L.N + C - 1) / C;
  try {
    for (std::size_t c = 0; c < chunks; ++c) {
      const int s = static_cast<int>(c % 2);
      if (c >= 2) finish(c - 2);
      Slot& sl = slots[s];
      const std::size_t first = c * C, count = std::min(C, L.N - first), coords = count * L.un;
      const compact::Range r =
          compact::range_of(H + first, count, M + first * L.un, coords, threads);
      const int wh = compact::unsigned_width(r.h_max), wm = compact::signed_width(r.m_lo, r.m_hi);
      compact::pack(H + first, count, M + first * L.un, coords, wh, wm, host(s, h_ph),
                    host(s, h_pm), threads);
      *failure_word(s) = kNoFailure;
      sl.c0.record(L.stream);
      check(cudaMemcpyAsync(dev(s, d_failure), host(s, h_failure), 8, cudaMemcpyHostToDevice,
                            L.stream),
            "reset failure flag");
      check(cudaMemcpyAsync(dev(s, d_ph), host(s, h_ph), count * static_cast<std::size_t>(wh),
                            cudaMemcpyHostToDevice, L.stream), "copy H");
      check(cudaMemcpyAsync(dev(s, d_pm), host(s, h_pm), coords * static_cast<std::size_t>(wm),
                            cudaMemcpyHostToDevice, L.stream), "copy M");
      sl.c1.record(L.stream);
      unpack_kernel<<<blocks_for(coords), kThreads, 0, L.stream>>>(
          dev(s, d_ph), count, dev(s, d_pm), coords, wh, wm,
          reinterpret_cast<std::uint32_t*>(dev(s, d_h)), reinterpret_cast<std::int64_t*>(dev(s, d_m)));
      decode_kernel<T><<<blocks_for(count), kThreads, 0, L.stream>>>(
          L.c, k, reinterpret_cast<std::uint32_t*>(dev(s, d_h)),
          reinterpret_cast<std::int64_t*>(dev(s, d_m)), m, first, count, y,
          reinterpret_cast<unsigned long long*>(dev(s, d_failure)));
      check(cudaGetLastError(), "launch the decode kernels");
      check(cudaMemcpyAsync(host(s, h_failure), dev(s, d_failure), 8, cudaMemcpyDeviceToHost,
                            L.stream),
            "copy failure flag");
      sl.k1.record(L.stream);
      sl.busy = true;
    }
    if (chunks >= 2) finish(chunks - 2);
    if (chunks >= 1) finish(chunks - 1);
  } catch (...) {
    cudaStreamSynchronize(L.stream);  // nothing in flight when the buffers go
    throw;
  }
  if (timing != nullptr) *timing = t;
}

template void encode_lattice<float>(const LrsuqParams&, const ChaChaKey&, const float*,
                                    std::size_t, double, int, std::uintptr_t, std::uint32_t*,
                                    std::int64_t*, double*, double*, Timing*, std::size_t, int);
template void encode_lattice<double>(const LrsuqParams&, const ChaChaKey&, const double*,
                                     std::size_t, double, int, std::uintptr_t, std::uint32_t*,
                                     std::int64_t*, double*, double*, Timing*, std::size_t, int);
template void encode_lattice_resident<float>(const LrsuqParams&, const ChaChaKey&, const float*,
                                             std::size_t, double, int, std::uintptr_t,
                                             std::uint32_t*, std::int64_t*, double*, double*,
                                             Timing*, std::size_t);
template void encode_lattice_resident<double>(const LrsuqParams&, const ChaChaKey&,
                                              const double*, std::size_t, double, int,
                                              std::uintptr_t, std::uint32_t*, std::int64_t*,
                                              double*, double*, Timing*, std::size_t);
template void decode_lattice<float>(const LrsuqParams&, const ChaChaKey&, const std::uint32_t*,
                                    const std::int64_t*, std::size_t, int, std::uintptr_t,
                                    float*, Timing*, std::size_t, int);
template void decode_lattice<double>(const LrsuqParams&, const ChaChaKey&, const std::uint32_t*,
                                     const std::int64_t*, std::size_t, int, std::uintptr_t,
                                     double*, Timing*, std::size_t, int);

}  // namespace cepam::gpu
