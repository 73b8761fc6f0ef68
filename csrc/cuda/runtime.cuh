// CUDA runtime helpers shared by the module's kernels (lrsuq_gpu.cu,
// ans_gpu.cu): errors as DeviceError, scoped device memory, the current
// device, and CUDA-event timers.  Included by .cu files only.
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

// Device scratch of one chunk, freed on scope exit.
class Scratch {
 public:
  Scratch(int device, std::size_t bytes) : device_(device), ptr_(device_alloc(device, bytes)) {}
  ~Scratch() { device_free(device_, ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class U>
  U* at(std::size_t byte_offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(ptr_) + byte_offset);
  }

 private:
  int device_;
  void* ptr_;
};

// CUDA events around a stream's work, summed into a Timing field.
class Timer {
 public:
  explicit Timer(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreate(&start_), "event");
    check(cudaEventCreate(&stop_), "event");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() { check(cudaEventRecord(start_, stream_), "event record"); }
  void stop(double* total_ms) {
    check(cudaEventRecord(stop_, stream_), "event record");
    check(cudaEventSynchronize(stop_), "event synchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start_, stop_), "event time");
    *total_ms += ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_{}, stop_{};
};

// Page-locked host memory (cudaHostAlloc), for asynchronous copies at
// the bus's speed; freed on scope exit.
class Pinned {
 public:
  explicit Pinned(std::size_t bytes) {
    check(cudaHostAlloc(&ptr_, bytes == 0 ? 1 : bytes, cudaHostAllocDefault),
          "allocate pinned host memory");
  }
  ~Pinned() { cudaFreeHost(ptr_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  template <class U>
  U* at(std::size_t byte_offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(ptr_) + byte_offset);
  }

 private:
  void* ptr_ = nullptr;
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
