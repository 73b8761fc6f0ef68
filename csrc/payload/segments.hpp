// The segments of a payload body, for both coders: the update's N =
// ceil(m / n) sub-vectors in segments of a fixed S = kSegmentCoordinates / n
// sub-vectors (the last segment the rest), each coded on its own with its
// length in front, so that segments are encoded and decoded in parallel and
// the decoder finds every segment before it decodes any.  S does not depend
// on the thread count, so neither do the bytes.  (Format version 3 for the
// ANS coder, version 6 for the Golomb coder; docs/format.md.)
#pragma once

#include <cstddef>

namespace cepam {

// Coordinates per segment (at most; kSegmentCoordinates / n sub-vectors).
// 2^17: segments cost 0.0016 bits per coordinate against one ANS stream
// and 0.001 against one pair of Golomb sections (measured: the lengths, the
// model bytes, each stream's first and final states, the sections'
// padding), and an update of 10^6 coordinates has eight segments to share
// among threads.
inline constexpr std::size_t kSegmentCoordinates = std::size_t{1} << 17;

// Sub-vectors per segment for dimension n.
inline std::size_t segment_subvectors(int n) {
  return kSegmentCoordinates / static_cast<std::size_t>(n);
}

// The number of segments of m coordinates in dimension n.
inline std::size_t body_segments(std::size_t m, int n) {
  const std::size_t d = static_cast<std::size_t>(n);
  const std::size_t N = m / d + (m % d != 0 ? 1 : 0);
  const std::size_t S = segment_subvectors(n);
  return N / S + (N % S != 0 ? 1 : 0);
}

}  // namespace cepam
