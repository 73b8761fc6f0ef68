// The LRSUQ stage on a CUDA device: the per-sub-vector functions of
// lrsuq/subvector.hpp run one sub-vector per thread, bit-identical to the
// CPU codec.  This header needs no CUDA headers (streams and device
// pointers travel as integers and plain pointers), so the Python binding
// compiles with the host compiler; lrsuq_gpu.cu holds all CUDA code.
//
// encode_lattice returns H, M and the side information (beta, V) that the
// ANS coder needs, on the host; encode_lattice_resident leaves them on the
// device, for the symbol kernels of Z^n (cuda/ans_gpu.hpp).  The decoder
// takes H and M from the host and writes the update into device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lrsuq/quantizer.hpp"
#include "random/chacha20.hpp"

namespace cepam::gpu {

// Milliseconds spent, measured with CUDA events on the stream.
struct Timing {
  double kernel_ms = 0.0;    // the LRSUQ kernels
  double transfer_ms = 0.0;  // copies between host and device
};

// The number of CUDA devices; 0 with *why set when there is no usable
// driver or device (never throws).
int device_count(std::string* why);

// The CUDA device that holds ptr (cudaPointerGetAttributes), or -1 for host
// memory; throws InvalidArgument for a pointer CUDA does not know.
int device_of(const void* ptr);

// Encodes x[0..m) * factor, x in device memory of the current device, on
// `stream` (a cudaStream_t; 0 is the legacy default stream): H[N], M[N n],
// beta[N] and V[N n] (host memory, N = ceil(m / n)) as lrsuq_encode_range
// gives them.  Throws the CPU codec's EncodingError for the first failing
// sub-vector, and DeviceError for CUDA failures.  chunk: sub-vectors per
// launch (0: kDefaultChunkCoordinates / n; the results do not depend on
// it).  threads: host threads that widen each chunk into the outputs
// (common/parallel.hpp; the same results for every count).
inline constexpr std::size_t kDefaultChunkCoordinates = std::size_t{1} << 20;
template <class T>
void encode_lattice(const LrsuqParams& p, const ChaChaKey& key, const T* x, std::size_t m,
                    double factor, int device, std::uintptr_t stream, std::uint32_t* H,
                    std::int64_t* M, double* beta, double* V, Timing* timing,
                    std::size_t chunk = 0, int threads = 1);

// encode_lattice with H[N], M[N n], beta[N] and V[N n] in device memory
// of `device` (the caller's), left there for the entropy coder's symbol
// kernels (cuda/ans_gpu.hpp).  Throws as encode_lattice (the first failing
// sub-vector's error, without its H).
template <class T>
void encode_lattice_resident(const LrsuqParams& p, const ChaChaKey& key, const T* x,
                             std::size_t m, double factor, int device, std::uintptr_t stream,
                             std::uint32_t* H, std::int64_t* M, double* beta, double* V,
                             Timing* timing, std::size_t chunk = 0);

// Decodes H[N] and M[N n] (host memory) into y[0..m) (device memory of
// `device`), as lrsuq_decode; throws the CPU codec's FormatError for a bad
// sub-vector.  threads: host threads that pack each chunk for its copy.
template <class T>
void decode_lattice(const LrsuqParams& p, const ChaChaKey& key, const std::uint32_t* H,
                    const std::int64_t* M, std::size_t m, int device, std::uintptr_t stream,
                    T* y, Timing* timing, std::size_t chunk = 0, int threads = 1);

// Device memory of `bytes` on `device` (cudaMalloc), and its release.
void* device_alloc(int device, std::size_t bytes);
void device_free(int device, void* ptr) noexcept;
// Copies `bytes` from device memory of `device` at ptr to host (synchronous).
void copy_to_host(int device, void* host, const void* ptr, std::size_t bytes);

}  // namespace cepam::gpu
