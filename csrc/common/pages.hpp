// PageArray<T>: n values of a trivial type T, not initialised, for the
// large working buffers each thread holds during a call (the rANS
// encoder's symbols of a segment, its output words).  Buffers of
// kPageArrayBytes or more are mapped from the system directly (mmap), and
// handed back when freed, but for a few kept for the next call (below);
// smaller ones, and all on Windows, come from operator new.  Why mapped:
// glibc raises its mmap threshold whenever a large block is freed (any
// program's numpy temporaries do), and then serves large blocks from
// per-thread arenas, where a freed buffer stays resident (at 16 threads,
// about 1 MB a thread more than the buffers themselves).  Why a few kept:
// a fresh mapping is faulted in a page at a time as it is written, and at
// m = 10^5 those faults took a fifth of a Z encode (with the mappings
// kept, 1.27 to 1.34x faster; 1.12 to 1.15x at 10^6).  The kept ones are
// bounded (kKeptMappingBytes in all, the process's whatever its thread
// count: a call's peak memory holds at most that much more) and reused
// whole.  A kept buffer holds what its last user wrote: like operator
// new's, every buffer is written before it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#if !defined(_WIN32)
#include <sys/mman.h>  // (madvise)
#endif

namespace cepam {

inline constexpr std::size_t kPageArrayBytes = std::size_t{1} << 18;
// The most bytes of freed mappings the process keeps for reuse.
inline constexpr std::size_t kKeptMappingBytes = std::size_t{4} << 20;

namespace pages {
// A mapping of at least `bytes` bytes (sets *mapped to its size): a kept
// one (at most four times as large), else a fresh one; nullptr where the
// system has none.  Not on Windows.
void* map(std::size_t bytes, std::size_t* mapped) noexcept;
// Hands back a mapping from map: kept while the kept ones stay within
// kKeptMappingBytes, else unmapped.
void unmap(void* p, std::size_t mapped) noexcept;
// The bytes of the mappings kept now (0 in a forked child, and on Windows).
std::size_t kept_bytes() noexcept;
}  // namespace pages

// Frees what page_array allocated: bytes != 0 marks a mapping.
struct PageDeleter {
  std::size_t bytes = 0;
  void operator()(void* p) const noexcept {
#if !defined(_WIN32)
    if (bytes != 0) {
      pages::unmap(p, bytes);
      return;
    }
#endif
    ::operator delete[](p);
  }
};

template <class T>
using PageArray = std::unique_ptr<T[], PageDeleter>;

// n values of T (nothing for n = 0); throws std::bad_alloc.
template <class T>
PageArray<T> page_array(std::size_t n) {
  static_assert(std::is_trivially_default_constructible_v<T> &&
                std::is_trivially_destructible_v<T>, "left uninitialised, never destroyed");
  if (n == 0) return PageArray<T>(nullptr, PageDeleter{});
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_alloc();
  const std::size_t bytes = n * sizeof(T);
#if !defined(_WIN32)
  if (bytes >= kPageArrayBytes) {
    std::size_t mapped = 0;
    void* p = pages::map(bytes, &mapped);
    if (p == nullptr) throw std::bad_alloc();
    return PageArray<T>(static_cast<T*>(p), PageDeleter{mapped});
  }
#endif
  return PageArray<T>(static_cast<T*>(::operator new[](bytes)), PageDeleter{});
}

// Asks the system to back the whole 2 MiB pages inside [p, p + bytes) with
// huge pages (Linux's transparent huge pages, where enabled), for a large
// buffer that a call is about to write through once, such as a payload:
// it is then faulted in 2 MiB at a time, not 4 KiB (at m = 10^8, about
// 12,000 faults fewer a call).  A hint: it changes no byte, and where it is
// refused or unknown nothing happens.  numpy advises its large arrays so.
inline void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  if (bytes < 2 * kHuge) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace cepam
