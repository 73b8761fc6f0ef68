// What the body coders' threaded loops share (payload/golomb_body.cpp,
// payload/ans_body.cpp): the sub-vectors of a segment, blocks of them, and
// the LRSUQ stage of a range of them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lrsuq/quantizer.hpp"
#include "payload/body.hpp"
#include "payload/segments.hpp"
#include "random/chacha20.hpp"

namespace cepam {

// The number of sub-vectors of m coordinates, ceil(m / n).
inline std::size_t subvectors(const LrsuqParams& p, std::size_t m) {
  const std::size_t n = static_cast<std::size_t>(p.n);
  return m / n + (m % n != 0 ? 1 : 0);
}

// The sub-vectors [first, last) of segment s (payload/segments.hpp).
struct SegmentRange {
  std::size_t first, last;
};
inline SegmentRange segment_range(const LrsuqParams& p, std::size_t N, std::size_t s) {
  const std::size_t S = segment_subvectors(p.n);
  return {s * S, N - s * S < S ? N : (s + 1) * S};
}

// Calls f(j0, count) for the blocks of `size` sub-vectors that cover
// [first, last).
template <class F>
void for_each_block(std::size_t first, std::size_t last, F&& f, std::size_t size) {
  for (std::size_t j0 = first; j0 < last; j0 += size) f(j0, last - j0 < size ? last - j0 : size);
}

// LRSUQ of sub-vectors [j0, j1) into H, M (and beta, V unless null),
// relative to j0: by the quantizer (with the working buffers `scratch`
// unless null), or copied from a stage computed elsewhere.
template <class T>
void lattice_range(const LrsuqParams& p, const KeyStream& ks, const T* x, std::size_t m,
                   double factor, const LatticeStage* stage, std::size_t j0, std::size_t j1,
                   std::uint32_t* H, std::int64_t* M, double* beta, double* V,
                   LrsuqEncodeScratch* scratch = nullptr) {
  if (stage == nullptr) {
    lrsuq_encode_range(p, ks, x, m, factor, j0, j1, H, M, beta, V, scratch);
    return;
  }
  const std::size_t n = static_cast<std::size_t>(p.n);
  std::copy(stage->H + j0, stage->H + j1, H);
  std::copy(stage->M + j0 * n, stage->M + j1 * n, M);
  if (beta != nullptr) std::copy(stage->beta + j0, stage->beta + j1, beta);
  if (V != nullptr) std::copy(stage->V + j0 * n, stage->V + j1 * n, V);
}

}  // namespace cepam
