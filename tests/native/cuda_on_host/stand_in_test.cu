// Tests of the host stand-in itself (cuda_runtime.h), as the module's .cu
// files are built: translate.py rewrites the launches, the C++ compiler
// builds the result.  tests/core/test_cuda_on_host.py compiles and runs it;
// it prints one line per check and exits non-zero if one fails.
//   barrier_after_return: a thread that returns before a __syncthreads()
//     the others reach is an error (reported, not passed or hung);
//   returns_after_the_barriers: threads that return after the block's last
//     barrier are fine;
//   concurrent_launches: two host threads launching one kernel at once
//     (with other argument types, i.e. other instantiations of launch())
//     get every block's sum right: the launches take turns on the kernel's
//     __shared__ array.
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

constexpr unsigned int kThreads = 128;

__global__ void block_sums(const int* x, int n, long long* sums) {
  __shared__ long long partial[kThreads];
  const unsigned int t = threadIdx.x;
  const unsigned int i = blockIdx.x * blockDim.x + t;
  partial[t] = i < static_cast<unsigned int>(n) ? x[i] : 0;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

// Threads from `live` on return before the barrier the others wait at.
__global__ void returns_early(int* out, int live) {
  __shared__ int seen[kThreads];
  if (static_cast<int>(threadIdx.x) >= live) return;
  seen[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = seen[(threadIdx.x + 1) % live];
}

// Every thread passes the barrier, then those from `live` on return.
__global__ void returns_after_the_barriers(int* out, int live) {
  __shared__ int seen[kThreads];
  seen[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (static_cast<int>(threadIdx.x) >= live) return;
  out[threadIdx.x] = seen[(threadIdx.x + 1) % kThreads];
}

namespace {

int failures = 0;

void check(bool ok, const char* name, const char* detail) {
  std::printf("%s %s%s%s\n", ok ? "ok" : "FAILED", name, detail[0] ? ": " : "", detail);
  if (!ok) ++failures;
}

void barrier_after_return() {
  std::vector<int> out(kThreads, -1);
  bool refused = false;
  try {
    returns_early<<<1, kThreads, 0, nullptr>>>(out.data(), 100);
  } catch (const std::runtime_error&) {
    refused = true;
  }
  check(refused, "barrier_after_return", "");
}

void returns_after_barriers() {
  std::vector<int> out(kThreads, -1);
  bool ok = true;
  try {
    returns_after_the_barriers<<<1, kThreads, 0, nullptr>>>(out.data(), 100);
  } catch (const std::runtime_error&) {
    ok = false;
  }
  for (int t = 0; t < 100 && ok; ++t) ok = out[t] == t + 1;
  check(ok, "returns_after_the_barriers", "");
}

// `launches` launches of `blocks` blocks each, n passed as N (int or long:
// two instantiations of launch()); the number of wrong block sums.
template <class N>
long wrong_sums(const std::vector<int>& x, unsigned int blocks, int launches) {
  std::vector<long long> sums(blocks);
  long wrong = 0;
  for (int l = 0; l < launches; ++l) {
    sums.assign(blocks, -1);
    block_sums<<<blocks, kThreads, 0, nullptr>>>(x.data(), static_cast<N>(x.size()),
                                                  sums.data());
    for (unsigned int b = 0; b < blocks; ++b) {
      long long expected = 0;
      for (unsigned int t = 0; t < kThreads; ++t) expected += x[b * kThreads + t];
      wrong += sums[b] != expected;
    }
  }
  return wrong;
}

void concurrent_launches() {
  constexpr unsigned int blocks = 256;
  constexpr int launches = 20;  // 2 x 20 x 256 = 10,240 block sums
  std::vector<int> x(blocks * kThreads);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int>((i * 2654435761u) % 1000);
  long wrong_int = 0, wrong_long = 0;
  std::thread other([&] { wrong_long = wrong_sums<long>(x, blocks, launches); });
  wrong_int = wrong_sums<int>(x, blocks, launches);
  other.join();
  char detail[96];
  std::snprintf(detail, sizeof detail, "%ld of %u block sums wrong", wrong_int + wrong_long,
                2 * launches * blocks);
  check(wrong_int + wrong_long == 0, "concurrent_launches", detail);
}

}  // namespace

int main() {
  barrier_after_return();
  returns_after_barriers();
  concurrent_launches();
  return failures == 0 ? 0 : 1;
}
