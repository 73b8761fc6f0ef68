// SIMD forms of the D4 and E8 trial and dither loops (lattice/root_lattices.hpp).
//
// The scalar loops in VoronoiLattice handle one sub-vector at a time; these
// handle four at once (AVX2: lane l is sub-vector c + l, the register of
// coordinate k holds coordinate k of the four), with the same IEEE
// operations in the same order as the scalar closest points, dithers and
// acceptance terms, so they give the same bits (lrsuq/simd_avx2.hpp explains
// the rules).  Each function processes a prefix of its sub-vectors, whole
// groups of four whose inputs are below 2^46 in magnitude (beyond, the
// integer conversions would leave the exact range), and returns how many
// sub-vectors it did; the caller's scalar loop does the rest.  Without AVX2
// they do nothing and return 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lattice/lattice.hpp"

namespace cepam::kernels {

// Sub-vectors c < count (elements e = c n + k, n = 4 for D4, 8 for E8), as
// VoronoiLattice::trial_batch: the dither v of words w, q = the closest
// point's basis coordinates of t - v, and, unless dev is null, dev[e] =
// (beta[e] ((G^T q)_k + v_k) - xs[e])^2, and unless v_out is null, v_out[e]
// = v_k.
std::size_t voronoi_trial(LatticeId id, const double* t, const double* xs, const double* beta,
                          const std::uint64_t* w, std::size_t count, std::int64_t* q,
                          double* dev, double* v_out);

// Sub-vectors c < count, as VoronoiLattice::dither_batch: v[e] = the dither
// of words w[c n .. c n + n).
std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v);

}  // namespace cepam::kernels
