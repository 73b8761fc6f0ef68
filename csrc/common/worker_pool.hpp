// The process's worker threads, kept from call to call.
//
// A parallel loop (common/parallel.hpp) asks for helpers: pool threads
// that run its work function beside the calling thread.  Starting threads
// for each loop cost the calling thread about 20 us a thread (334 us a loop
// on 16 threads, measured on a 2-core machine), each new thread's stack
// was mapped and unmapped (unmapping interrupts every core running the
// process), and an encode runs several loops.  The pool starts a thread
// the first time a loop needs it and keeps it, asleep, for later loops.
//
// - Any number of loops may run at once (calls from several Python
//   threads, a loop inside a task): a helper takes the oldest loop that
//   still wants helpers.  A loop's caller never waits for a helper that has
//   not started: when its own work is done it withdraws the helpers not yet
//   started and waits only for those running, which finish.  So no loop
//   waits on another, and a loop gets fewer helpers (never wrong results:
//   loops hand out their tasks dynamically) when others hold the threads.
// - After fork() the child has none of the parent's threads: the pool is
//   made anew in a process other than the one that made it (the parent's is
//   left untouched, never freed).
// - The threads live until the process exits, asleep when there is no work.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace cepam {

class WorkerPool {
 public:
  // The pool of this process (made at first use, and after a fork).
  static WorkerPool& instance();

  // Runs work() on the calling thread and on up to `helpers` pool threads
  // at once, and returns once every run of it has returned.  work must not
  // throw; it is run at least once (by the caller), and a helper that has
  // not started by the time the caller's run returns is not started.
  template <class Work>
  void run(std::size_t helpers, Work& work) {
    Loop loop{&call<Work>, &work};
    if (helpers > 0) post(loop, helpers);
    work();
    if (helpers > 0) finish(loop);
  }

  // Threads the pool holds (for tests and benchmarks).
  std::size_t threads();

  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

 private:
  struct Loop {
    void (*fn)(void*);
    void* work;
    std::size_t wanted = 0;   // helpers still to start (the pool's mutex guards both)
    std::size_t running = 0;  // helpers running
  };
  template <class Work>
  static void call(void* work) {
    (*static_cast<Work*>(work))();
  }

  WorkerPool() = default;
  void post(Loop& loop, std::size_t helpers);
  void finish(Loop& loop);
  void serve();

  std::mutex mutex_;
  std::condition_variable posted_;    // a loop wants helpers
  std::condition_variable finished_;  // a helper has returned
  std::deque<Loop*> loops_;           // loops with wanted > 0, oldest first
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;              // threads waiting for a loop, or started to
};

}  // namespace cepam
