// The fast path of the Maxwell ziggurat (random/maxwell.hpp) over a batch of
// words: the Gaussian Z^1 latent radii (format version 10, lrsuq/latent.hpp).
// The lane code is lrsuq/maxwell_lanes.hpp (AVX-512: maxwell_kernels_avx512.cpp;
// AVX2 and NEON: maxwell_kernels.cpp); the portable loop is the reference
// it mirrors, maxwell::fast per word.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam::kernels {

// out[c] = sigma maxwell::fast(w[c]) for c < count.  Where the fast test
// does not keep w[c]'s abscissa (fast gives -1.0, so out[c] = -sigma), c
// is appended to slow; returns how many were (at most count).
std::size_t maxwell_radii(double sigma, const std::uint64_t* w, std::size_t count, double* out,
                          std::uint64_t* slow);

namespace avx512 {
// The whole groups of eight (AVX-512 F, DQ and VL): the groups done, *nslow
// indices appended to slow.
std::size_t maxwell_radii(double sigma, const std::uint64_t* w, std::size_t count, double* out,
                          std::uint64_t* slow, std::size_t* nslow);
}  // namespace avx512

}  // namespace cepam::kernels
