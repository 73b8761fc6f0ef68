// The mappings that common/pages.hpp's page_array hands out and keeps.
#include "common/pages.hpp"

#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>

namespace cepam::pages {
namespace {

// Freed mappings kept for reuse: at most kSlots of them, kKeptMappingBytes
// in all.  They belong to the process that kept them: a child forked while
// another thread held the lock would wait on it for ever, so a child
// neither takes nor keeps any (the parent's, copied on write, stay unused).
struct Kept {
  static constexpr int kSlots = 16;
  std::mutex lock;
  pid_t owner = getpid();
  void* p[kSlots] = {};
  std::size_t bytes[kSlots] = {};
  std::size_t total = 0;
};

// Made on first use and never destroyed: a thread may free a buffer while
// the process exits.
Kept& kept() {
  static Kept* const k = new Kept;
  return *k;
}

// Mappings are made a granule larger than asked, rounded up to granules,
// so that a kept one serves any request up to a granule larger than the
// one it was made for (the rANS words of a segment come as 2^17 and
// 2^17 + 1 words: without it, each freed buffer was a word too small for
// the next request, and kept ones piled up beside fresh ones).  Pages past
// what a user writes are never touched: they take no memory.
constexpr std::size_t kGranule = std::size_t{1} << 16;

}  // namespace

void* map(std::size_t bytes, std::size_t* mapped) noexcept {
  Kept& k = kept();
  if (k.owner == getpid()) {
    const std::lock_guard<std::mutex> hold(k.lock);
    int best = -1;  // the smallest kept one that holds `bytes`, at most 4x as large
    for (int s = 0; s < Kept::kSlots; ++s)
      if (k.p[s] != nullptr && k.bytes[s] >= bytes && k.bytes[s] / 4 <= bytes &&
          (best < 0 || k.bytes[s] < k.bytes[best]))
        best = s;
    if (best >= 0) {
      void* p = k.p[best];
      *mapped = k.bytes[best];
      k.total -= k.bytes[best];
      k.p[best] = nullptr;
      return p;
    }
  }
  if (bytes > static_cast<std::size_t>(-1) - 2 * kGranule) return nullptr;
  const std::size_t size = (bytes + kGranule - 1) / kGranule * kGranule + kGranule;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  *mapped = size;
  return p;
}

void unmap(void* p, std::size_t mapped) noexcept {
  Kept& k = kept();
  if (k.owner == getpid()) {
    const std::lock_guard<std::mutex> hold(k.lock);
    if (k.total + mapped <= kKeptMappingBytes) {
      for (int s = 0; s < Kept::kSlots; ++s) {
        if (k.p[s] != nullptr) continue;
        k.p[s] = p;
        k.bytes[s] = mapped;
        k.total += mapped;
        return;
      }
    }
  }
  munmap(p, mapped);
}

std::size_t kept_bytes() noexcept {
  Kept& k = kept();
  if (k.owner != getpid()) return 0;
  const std::lock_guard<std::mutex> hold(k.lock);
  return k.total;
}

}  // namespace cepam::pages

#else

namespace cepam::pages {
std::size_t kept_bytes() noexcept { return 0; }
}  // namespace cepam::pages

#endif  // !_WIN32
