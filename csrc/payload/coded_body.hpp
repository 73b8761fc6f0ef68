// A payload body as its coder leaves it: parts (the coder's parameters or
// source model, then each segment, coded by one thread) whose total size is
// known only once every part is coded.  The caller allocates the body's
// final buffer of size() bytes (a bytes object, or its place in the sealed
// payload) and write() copies the parts into place in parallel, each part
// by one thread (encrypting it on the way where the caller says so),
// releasing it once copied: no thread copies the whole body
// (docs/guide/performance.md, "Sizes chosen by measurement").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/parallel.hpp"

namespace cepam {

struct CodedBody {
  std::vector<std::vector<std::uint8_t>> parts;

  std::size_t size() const {
    std::size_t total = 0;
    for (const auto& part : parts) total += part.size();
    return total;
  }

  // Writes the parts in order at out (size() bytes) on up to `threads`
  // threads (one below kParallelBytes: the loop would cost more than the
  // copy), each part by put(dst, part, bytes, offset) (offset: the part's
  // in the body; by default a copy), and releases them.
  template <class Put>
  void write(std::uint8_t* out, int threads, Put&& put) {
    static constexpr std::size_t kParallelBytes = std::size_t{1} << 20;
    std::vector<std::size_t> at(parts.size() + 1, 0);
    for (std::size_t i = 0; i < parts.size(); ++i) at[i + 1] = at[i] + parts[i].size();
    parallel_for(at.back() >= kParallelBytes ? threads : 1, parts.size(), [&](std::size_t i) {
      if (!parts[i].empty()) put(out + at[i], parts[i].data(), parts[i].size(), at[i]);
      std::vector<std::uint8_t>().swap(parts[i]);
    });
    parts.clear();
  }
  void write(std::uint8_t* out, int threads) {
    write(out, threads, [](std::uint8_t* dst, const std::uint8_t* part, std::size_t bytes,
                           std::size_t) { std::memcpy(dst, part, bytes); });
  }

  // The body in one vector (for callers that want one).
  std::vector<std::uint8_t> bytes(int threads = 1) {
    std::vector<std::uint8_t> out(size());
    write(out.data(), threads);
    return out;
  }
};

}  // namespace cepam
