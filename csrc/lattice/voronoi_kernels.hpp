// SIMD forms of the A2, D4 and E8 trial and dither loops (lattice/root_lattices.hpp).
//
// The scalar code handles one sub-vector at a time; these handle four
// (AVX2) or eight (AVX-512) at once, lane l of a register being one
// sub-vector and the register of coordinate k holding coordinate k of
// each, with the same IEEE operations in the same order as the scalar
// closest points, dithers and acceptance test, so they give the same bits
// (lattice/voronoi_lanes.hpp, written once for both instruction sets).
// Each function processes a prefix of its sub-vectors and returns how many
// it did; the caller's scalar loop does the rest.  Without AVX2 they do
// nothing and return 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lattice/lattice.hpp"

namespace cepam::kernels {

// One LRSUQ trial, number `trial`, of the sub-vectors c = idx[i] of a chunk
// (c = i where idx is null), i < count, of the lattice id (n = 2 for A2, 4
// for D4, 8 for E8), as subvector::voronoi_trial and the acceptance test:
//   v = the dither of words w[i n .. i n + n); p = Q(t_c - v) (t_c =
//   t[c n .. c n + n), likewise xs_c); accepted when
//   0 + sum_k (beta[c] (p_k + v_k) - xs_c[k])^2 <= radius[c] radius[c].
// Every accepted sub-vector gets H[c] = trial, q[c n + k] = p's basis
// coordinates and, unless V is null, V[c n + k] = v_k; rejected ones may
// get them too (a later trial's call writes them again; E8's kernels run
// the exact trial only where a screen has not shown that it must fail:
// lattice/voronoi_lanes.hpp, screened_trials); the rejected ones' c are
// written to rej in order (rej may be idx) and counted in *nrej.
// Stops before a group of sub-vectors with an input |t| >= 2^46.
std::size_t voronoi_trials(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                           const std::size_t* idx, std::size_t count, const double* t,
                           const double* xs, const double* beta, const double* radius,
                           std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                           std::size_t* nrej);

// Sub-vectors c < count, as VoronoiLattice::dither_batch: v[e] = the dither
// of words w[c n .. c n + n).
std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v);

// Sub-vectors c < count, as VoronoiLattice::reconstruct_batch: y[e] =
// T(beta[e] ((G q_c)_k + v[e])), e = c n + k (beta repeated per coordinate).
// AVX-512 only.
template <class T>
std::size_t voronoi_reconstruct(LatticeId id, const std::int64_t* q, const double* v,
                                const double* beta, std::size_t count, T* y);

namespace avx512 {
// The AVX-512 forms (voronoi_kernels_avx512.cpp), for CPUs with AVX-512 F,
// DQ and VL (simd_avx512dq()).
std::size_t voronoi_trials(LatticeId id, std::uint32_t trial, const std::uint64_t* w,
                           const std::size_t* idx, std::size_t count, const double* t,
                           const double* xs, const double* beta, const double* radius,
                           std::uint32_t* H, std::int64_t* q, double* V, std::size_t* rej,
                           std::size_t* nrej);
std::size_t voronoi_dither(LatticeId id, const std::uint64_t* w, std::size_t count, double* v);
template <class T>
std::size_t voronoi_reconstruct(LatticeId id, const std::int64_t* q, const double* v,
                                const double* beta, std::size_t count, T* y);
}  // namespace avx512

}  // namespace cepam::kernels
