// The CUDA module's kernels run on the host, for tests on machines without a
// GPU (CMakeLists.txt's CEPAM_CUDA_ON_HOST; tests/core/test_cuda.py's
// "host" device).  This header stands in for <cuda_runtime.h> (each
// rewritten file includes it first) and for the kernel language:
//   - a launch (translate.py rewrites `k<<<grid, block, 0, stream>>>(args)`
//     as `cepam_on_host::launch(grid, block, 0, stream, k, args)`) runs its
//     blocks one after another, each block's threads as fibers on the
//     calling thread: __syncthreads() switches to the block's next thread,
//     and a barrier is passed when every thread of the block waits at it
//     (threads at different barriers, or a barrier reached after a thread
//     of the block returned, are an error);
//   - __shared__ variables are static (one block runs at a time: launches
//     from several host threads take turns, one lock for every kernel);
//     atomics are plain read-modify-writes (one thread runs at a time);
//   - device memory is host memory, filled with 0xA5 when allocated (as
//     uninitialised device memory, so that a kernel reading what nobody
//     wrote gives other values than the CPU); copies, streams and events are
//     synchronous; there is one device, 0.
// What this checks: every kernel's indexing, its barriers' placement
// (a thread that skips one deadlocks the block: reported, not hung) and the
// host's side (layouts, offsets, copies) against the CPU codec bit for bit.
// What it cannot check: races between threads, warp or memory-model
// effects, and the device compiler's arithmetic (the GPU run does).
#pragma once

#include <ucontext.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __shared__ static

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};

// The running thread's coordinates (set by the scheduler before it resumes
// a fiber).
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace cepam_on_host {

[[noreturn]] inline void fail(const char* what) { throw std::runtime_error(what); }

// AddressSanitizer told of each switch of stacks (a build with
// -fsanitize=address; nothing otherwise): start before it, finish after.
inline void start_switch(void** fake_stack, const void* bottom, std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}
inline void finish_switch(void* fake_stack, const void** bottom, std::size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#else
  (void)fake_stack, (void)bottom, (void)size;
#endif
}

// The fibers of one block of threads on the calling thread.
class Block {
 public:
  static constexpr std::size_t kStack = std::size_t{1} << 19;  // 512 KiB a thread

  // Runs body() once for each of `threads` threads (threadIdx.x set),
  // switching at every barrier; throws if the threads cannot all pass a
  // barrier (some wait at one while others wait at another, or returned,
  // in this round or an earlier one).
  template <class Body>
  void run(unsigned int threads, Body& body) {
    grow(threads);
    body_ = &body;
    call_ = [](void* b) { (*static_cast<Body*>(b))(); };
    std::vector<Fiber> fibers(threads);
    for (unsigned int t = 0; t < threads; ++t) {
      Fiber& f = fibers[t];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stacks_[t];
      f.context.uc_stack.ss_size = kStack;
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, &Block::entry, 0);
    }
    unsigned int live = threads;
    while (live > 0) {
      unsigned int waiting = 0;
      int site = 0;  // the line of the barrier the threads wait at
      bool one_site = true;
      for (unsigned int t = 0; t < threads; ++t) {
        Fiber& f = fibers[t];
        if (f.done) continue;
        current_ = &f;
        threadIdx = dim3(t);
        f.at_barrier = 0;
        start_switch(&scheduler_fake_, stacks_[t], kStack);
        swapcontext(&scheduler_, &f.context);
        finish_switch(scheduler_fake_, nullptr, nullptr);
        if (f.at_barrier != 0) {
          one_site = one_site && (waiting == 0 || f.at_barrier == site);
          site = f.at_barrier;
          ++waiting;
        } else {
          f.done = true;  // (returned through uc_link)
          --live;
        }
      }
      // Every thread of the block, none returned, at one barrier.
      if ((waiting != 0 && waiting != threads) || !one_site) {
        current_ = nullptr;  // (the block's fibers are abandoned, their stacks reused)
        fail("a barrier (__syncthreads) that not every thread of the block reached "
             "(some wait at another, or returned)");
      }
    }
    current_ = nullptr;
  }

  // __syncthreads() at source line `line`: back to the scheduler until
  // every thread of the block waits at that barrier.
  static void barrier(int line) {
    Block& b = instance();
    if (b.current_ == nullptr) fail("__syncthreads outside a kernel");
    Fiber* f = b.current_;
    f->at_barrier = line;
    start_switch(&f->fake_stack, b.scheduler_bottom_, b.scheduler_size_);
    swapcontext(&f->context, &b.scheduler_);
    finish_switch(f->fake_stack, &b.scheduler_bottom_, &b.scheduler_size_);
  }

  static Block& instance() {
    static thread_local Block block;
    return block;
  }

  ~Block() {
    for (void* s : stacks_) munmap(s, kStack);
  }

 private:
  struct Fiber {
    ucontext_t context{};
    int at_barrier = 0;  // the line of the barrier it waits at; 0: none
    bool done = false;
    void* fake_stack = nullptr;  // (AddressSanitizer's)
  };

  static void entry() {
    Block& b = instance();
    finish_switch(nullptr, &b.scheduler_bottom_, &b.scheduler_size_);
    b.call_(b.body_);
    start_switch(nullptr, b.scheduler_bottom_, b.scheduler_size_);  // (back through uc_link)
  }

  void grow(unsigned int threads) {
    while (stacks_.size() < threads) {
      void* s = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (s == MAP_FAILED) fail("cannot map a fiber's stack");
      stacks_.push_back(s);
    }
  }

  ucontext_t scheduler_{};
  void* scheduler_fake_ = nullptr;  // (AddressSanitizer's: the scheduler's stack)
  const void* scheduler_bottom_ = nullptr;
  std::size_t scheduler_size_ = 0;
  Fiber* current_ = nullptr;
  void* body_ = nullptr;
  void (*call_)(void*) = nullptr;
  std::vector<void*> stacks_;
};

// The lock launches take turns by: one for every kernel and every
// instantiation of launch() (a kernel launched with other argument types
// is another instantiation, and runs on the same __shared__ variables).
inline std::mutex& launch_lock() {
  static std::mutex lock;
  return lock;
}

// kernel(args...) on a grid of blocks (x only, as the module launches).
template <class... Params, class... Args>
void launch(dim3 grid, dim3 block, std::size_t shared, void* /*stream*/,
            void (*kernel)(Params...), Args&&... args) {
  if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1)
    fail("only one-dimensional launches run on the host");
  if (shared != 0) fail("dynamic shared memory does not run on the host");
  if (block.x == 0 || block.x > 1024 || grid.x == 0) fail("invalid launch configuration");
  // The arguments converted once, as a launch copies them; each thread
  // gets its own copy of them (by-value parameters).
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  auto body = [&] { std::apply(kernel, params); };
  const std::lock_guard<std::mutex> turn(launch_lock());  // (__shared__ is static)
  gridDim = grid;
  blockDim = block;
  for (unsigned int g = 0; g < grid.x; ++g) {
    blockIdx = dim3(g);
    Block::instance().run(block.x, body);
  }
}

inline std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::now(); }

}  // namespace cepam_on_host

#define __syncthreads() cepam_on_host::Block::barrier(__LINE__)

template <class T>
T atomicMin(T* p, T v) {
  const T old = *p;
  if (v < old) *p = v;
  return old;
}
template <class T>
T atomicMax(T* p, T v) {
  const T old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T>
T atomicOr(T* p, T v) {
  const T old = *p;
  *p = old | v;
  return old;
}
template <class T>
T atomicExch(T* p, T v) {
  const T old = *p;
  *p = v;
  return old;
}

// --- the runtime ---------------------------------------------------------

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
using cudaError = cudaError_t;
// (the values the module uses, numbered as in CUDA)
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
enum cudaMemoryType { cudaMemoryTypeDevice = 2, cudaMemoryTypeManaged = 3 };
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st {
  std::chrono::steady_clock::time_point at;
};
using cudaEvent_t = CUevent_st*;
constexpr unsigned int cudaHostAllocDefault = 0;

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
  }
  return "unknown error";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
inline thread_local int cepam_on_host_device = 0;
inline cudaError_t cudaGetDevice(int* device) {
  *device = cepam_on_host_device;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  if (device != 0) return cudaErrorInvalidValue;
  cepam_on_host_device = device;
  return cudaSuccess;
}
// Every pointer is device 0's memory (tests pass host arrays as CUDA ones).
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  *a = cudaPointerAttributes{cudaMemoryTypeDevice, 0, const_cast<void*>(p), nullptr};
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  *p = std::malloc(bytes);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::memset(*p, 0xA5, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned int) {
  return cudaMalloc(p, bytes);
}
inline cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
inline cudaError_t cudaMemcpy(void* to, const void* from, std::size_t bytes, cudaMemcpyKind) {
  if (bytes != 0) std::memmove(to, from, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* to, const void* from, std::size_t bytes,
                                   cudaMemcpyKind kind, cudaStream_t = nullptr) {
  return cudaMemcpy(to, from, bytes, kind);
}
inline cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st{cepam_on_host::now()};
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  e->at = cepam_on_host::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t stop) {
  *ms = std::chrono::duration<float, std::milli>(stop->at - start->at).count();
  return cudaSuccess;
}
