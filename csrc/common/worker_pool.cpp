#include "common/worker_pool.hpp"

#include <algorithm>
#include <atomic>

#if defined(_WIN32)
#include <process.h>
#else
#include <unistd.h>
#endif

namespace cepam {
namespace {

long process_id() {
#if defined(_WIN32)
  return static_cast<long>(_getpid());
#else
  return static_cast<long>(getpid());
#endif
}

// A pool and the process that made it (a forked child makes its own).
struct OwnedPool {
  long pid;
  WorkerPool* pool;
};

}  // namespace

WorkerPool& WorkerPool::instance() {
  // Lock-free: a fork may happen while another thread is here.
  static std::atomic<OwnedPool*> current{nullptr};
  const long pid = process_id();
  OwnedPool* owned = current.load(std::memory_order_acquire);
  if (owned != nullptr && owned->pid == pid) return *owned->pool;
  // (A parent's pool is left as it is: its threads do not exist here.)
  auto* made = new OwnedPool{pid, new WorkerPool};
  if (current.compare_exchange_strong(owned, made, std::memory_order_acq_rel)) return *made->pool;
  delete made->pool;  // another thread of this process made one first
  delete made;
  return *owned->pool;
}

std::size_t WorkerPool::threads() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

void WorkerPool::post(Loop& loop, std::size_t helpers) {
  const std::lock_guard<std::mutex> lock(mutex_);
  loop.wanted = helpers;
  loops_.push_back(&loop);
  const std::size_t woken = std::min(helpers, idle_);
  for (std::size_t i = 0; i < woken; ++i) posted_.notify_one();
  // Threads for the helpers no idle thread can be (they take the oldest
  // loop first; a thread that cannot be started leaves the work to fewer).
  // A new thread counts as idle from here, not from when it first runs: a
  // caller that finishes the loop before its helpers start, and posts the
  // next one, finds them idle rather than making more.
  for (std::size_t t = woken; t < helpers; ++t) {
    ++idle_;
    try {
      threads_.emplace_back([this] { serve(); });
    } catch (...) {
      --idle_;
      break;
    }
  }
}

void WorkerPool::finish(Loop& loop) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (loop.wanted > 0) {
    loops_.erase(std::find(loops_.begin(), loops_.end(), &loop));
    loop.wanted = 0;
  }
  finished_.wait(lock, [&loop] { return loop.running == 0; });
}

void WorkerPool::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {  // (idle_ counts this thread here: post() and the loop's end count it)
    posted_.wait(lock, [this] { return !loops_.empty(); });
    --idle_;
    Loop* loop = loops_.front();
    if (--loop->wanted == 0) loops_.pop_front();
    ++loop->running;
    lock.unlock();
    loop->fn(loop->work);
    lock.lock();
    // (Notified under the lock: the loop's caller, and the loop with it,
    // outlive this thread's last touch of it.)
    if (--loop->running == 0) finished_.notify_all();
    ++idle_;
  }
}

}  // namespace cepam
