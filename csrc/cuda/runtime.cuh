// CUDA runtime helpers shared by the module's kernels (lrsuq_gpu.cu,
// ans_gpu.cu): errors as DeviceError, scoped device memory, the current
// device, CUDA-event timers and keys as kernel arguments.  Included by .cu
// files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "common/errors.hpp"
#include "cuda/lrsuq_gpu.hpp"

namespace cepam::gpu {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw DeviceError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
  }
}

// Memory owned by a scoped buffer (device or page-locked host), addressed
// by byte offsets.
class Bytes {
 public:
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  template <class U>
  U* at(std::size_t byte_offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(ptr_) + byte_offset);
  }

 protected:
  explicit Bytes(void* ptr) : ptr_(ptr) {}
  ~Bytes() = default;
  void* ptr_;
};

// Device scratch of one chunk, freed on scope exit.
class Scratch : public Bytes {
 public:
  Scratch(int device, std::size_t bytes) : Bytes(device_alloc(device, bytes)), device_(device) {}
  ~Scratch() { device_free(device_, ptr_); }

 private:
  int device_;
};

// Page-locked host memory (cudaHostAlloc), for asynchronous copies at
// the bus's speed; freed on scope exit.
class Pinned : public Bytes {
 public:
  explicit Pinned(std::size_t bytes) : Bytes(allocate(bytes)) {}
  ~Pinned() { cudaFreeHost(ptr_); }

 private:
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault),
          "allocate pinned host memory");
    return p;
  }
};

// A CUDA event, destroyed on scope exit.
class Event {
 public:
  Event() { check(cudaEventCreate(&e_), "event"); }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream) { check(cudaEventRecord(e_, stream), "event record"); }
  void wait() { check(cudaEventSynchronize(e_), "event synchronize"); }
  // Milliseconds from `start` to this event (both recorded and complete).
  double since(const Event& start) const {
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start.e_, e_), "event time");
    return ms;
  }

 private:
  cudaEvent_t e_{};
};

// CUDA events around a stream's work, summed into a Timing field.
class Timer {
 public:
  explicit Timer(cudaStream_t stream) : stream_(stream) {}
  void start() { start_.record(stream_); }
  void stop(double* total_ms) {
    stop_.record(stream_);
    stop_.wait();
    *total_ms += stop_.since(start_);
  }

 private:
  cudaStream_t stream_;
  Event start_, stop_;
};

// bytes rounded up to a multiple of 8: the offsets of the parts of one
// device allocation.
constexpr std::size_t pad8(std::size_t bytes) { return (bytes + 7) / 8 * 8; }

// The parts of one allocation, in order, each at a multiple of 8 bytes:
// add(bytes) gives the next part's offset, bytes() the allocation's size.
class Layout {
 public:
  std::size_t add(std::size_t bytes) {
    const std::size_t at = bytes_;
    bytes_ += pad8(bytes);
    return at;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
};

// Threads a block for the decoders of whole bodies (a block a segment:
// one reads the segment, all decode its values).
constexpr int kDecodeThreads = 128;

// A ChaCha20 key as a kernel argument (by value).
struct Key {
  std::uint32_t w[8];
};

inline Key key_words(const ChaChaKey& key) {
  Key k{};
  for (int i = 0; i < 8; ++i) k.w[i] = key[static_cast<std::size_t>(i)];
  return k;
}

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "get device");
    check(cudaSetDevice(device), "set device");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

}  // namespace cepam::gpu
