// Native worker threads for the core's data-parallel loops.
//
// parallel_for(threads, count, task) runs task(i) once for every i in
// [0, count) on up to `threads` threads: the calling thread and the
// process's worker pool (common/worker_pool.hpp), which keeps its threads
// from loop to loop.  Tasks are handed out in increasing order of i, to
// whichever thread asks next.  Results must not depend
// on which thread runs a task: tasks write disjoint outputs, and whatever
// they reduce is reduced in an order that does not matter (integer sums,
// maxima) or afterwards, in task order, by the caller.
//
// Errors are deterministic: if tasks throw, the exception of the failing
// task of lowest index is rethrown once every thread has stopped, the same
// whatever the thread count.  Every task below it has run; tasks above a
// failed one are skipped where they have not started.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>

#include "common/worker_pool.hpp"

namespace cepam {

// The largest thread count the core accepts (callers validate their own
// argument against it).
inline constexpr int kMaxThreads = 1024;

// The error of the lowest-indexed failing task of a parallel loop (for
// loops that hand out their own tasks; parallel_for uses it).
class FirstError {
 public:
  explicit FirstError(std::size_t none) : failed_(none) {}
  // Records the exception being handled as task i's.
  void record(std::size_t i) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (i < failed_.load(std::memory_order_relaxed)) {
      failed_.store(i, std::memory_order_release);
      error_ = std::current_exception();
    }
  }
  // The lowest failing task so far (`none` if none).
  std::size_t failed() const { return failed_.load(std::memory_order_acquire); }
  // Rethrows the recorded exception, if any (once the threads have stopped).
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<std::size_t> failed_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

// parallel_for with a state per worker: each thread that runs tasks makes
// one with make() (before its first task) and passes it to each of its
// tasks, task(state, i): buffers a thread reuses from task to task.
// Results must not depend on which tasks share a state.
template <class Make, class Task>
void parallel_for_with(int threads, std::size_t count, Make&& make, Task&& task) {
  if (threads < 1) threads = 1;
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(threads), count);
  if (workers <= 1) {
    if (count == 0) return;
    auto state = make();
    for (std::size_t i = 0; i < count; ++i) task(state, i);
    return;
  }
  std::atomic<std::size_t> next{0};
  FirstError error(count);
  auto work = [&]() noexcept {
    std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= count || i > error.failed()) return;
    try {
      auto state = make();
      for (;;) {
        try {
          task(state, i);
        } catch (...) {
          error.record(i);
        }
        i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= count || i > error.failed()) return;
      }
    } catch (...) {
      error.record(i);  // make() failed: task i has not run
    }
  };
  WorkerPool::instance().run(workers - 1, work);
  error.rethrow();
}

template <class Task>
void parallel_for(int threads, std::size_t count, Task&& task) {
  parallel_for_with(
      threads, count, [] { return 0; }, [&task](int, std::size_t i) { task(i); });
}

}  // namespace cepam
