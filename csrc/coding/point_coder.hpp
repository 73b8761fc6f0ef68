// Joint entropy model of a whole lattice point, for the lattices whose
// Voronoi cell is not a box (A2, D4, E8), at low signal-to-noise ratio.
//
// Given the decoder's side information (scale beta, dither V of the
// accepted trial), the point M = m is the one whose ball
// beta (G^T m + V) + B(beta rho) holds the input x, so
//   P(M = m | beta, V) ~ P_X(||x / beta - V - G^T m|| <= rho).
// The coordinate-by-coordinate box model (CellCoder) spreads this
// probability onto neighbouring points when the source is small against the
// cell; this model instead takes the source as N(mu, s^2 I) (the mean and
// variance of the SourceModel), so that, in lattice units, with
// t = mu / beta - V and sp = s / beta,
//   P(m) ~ P(chi'^2_n(lambda) <= rho^2 / sp^2),  lambda = ||G^T m - t||^2 / sp^2,
// by Sankaran's normal approximation and the library's own log, exp and
// normal CDF (detmath): the same bits on every platform.
//
// Candidates: the lattice points within distance R = rho + sp (sqrt(n) + 1)
// of t, enumerated (Fincke and Pohst) over the lower-triangular basis, k =
// n-1 .. 0, m_k increasing at each level (D4 and E8: the same points in
// the same order, walked in the coordinates G^T m, point_coder.cpp).
// Point i (of K) gets the frequency 1 + floor(P_i (S - 2K) / sum P), S =
// 2^24 - kEscapeFreq, and the first most probable point the rest up to S;
// the escape is [S, 2^24).  An escaped
// point, and every point of a sub-vector without a table, is coded with the
// box model.  A sub-vector has no table when sp > rho (where the box model does
// as well), when R exceeds a radius cap (the ball
// would hold more than about kMaxCandidates / 2 points), when t is beyond
// 2^40, when the enumeration finds no point or more than kMaxCandidates, or
// when the model's moments are not finite.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lattice/lattice.hpp"
#include "coding/point_core.hpp"
#include "coding/point_table.hpp"
#include "coding/rans.hpp"
#include "coding/source_model.hpp"

namespace cepam {

class PointCoder {
 public:
  // 64 keeps the table cheap (E8 at rms/sigma 0.9: 2.3 M coords/s encode,
  // 5.6 decode, 0.89 bits; 1024 gave 0.78 bits at 0.2 M coords/s).
  static constexpr std::size_t kMaxCandidates = kPointMaxCandidates;
  // (coding/point_core.hpp: the arithmetic shared with a GPU)
  static constexpr std::uint32_t kEscapeFreq = kPointEscapeFreq;
  static constexpr std::uint32_t kSlots = kPointSlots;  // S: the escape's start
  static constexpr double kTail = kPointTail;  // R = rho + sp (sqrt(n) + kTail)
  static constexpr double kBoundShrink = kPointBoundShrink;  // (point_coder.cpp)

  // The walk's tables (D4, E8; coding/point_core.hpp) for a coset.
  static constexpr int kMaxWindow = kPointMaxWindow;
  using Coset = PointCoset;
  using FillCosets = void (*)(const double* t, Coset* s);

  PointCoder(const SourceModel& model, const TriangularBasis& basis);

  // Builds the table of a sub-vector from beta and its dither v[n]; false
  // when it has none (the box model codes it).
  bool prepare(double beta, const double* v);
  // After a successful prepare: codes m[n] and returns true if it is a
  // candidate, else codes the escape and returns false (the caller then
  // codes m with the box model).
  bool encode(const std::int64_t* m, AnsEncoder& enc) const;
  // The decoder's side: true and m[n] for a candidate, false after the escape.
  bool decode(AnsDecoder& dec, std::int64_t* m) const;
  // Whether m[n] is a candidate (an escaped point must not be).
  bool listed(const std::int64_t* m) const;
  // What a sub-vector's frame depends on besides beta and v.
  const PointBounds& bounds() const { return bounds_; }
  // The basis as the enumeration reads it (coding/point_table.hpp).
  const PointBasis& basis() const { return basis_; }

 private:
  PointBasis basis_;
  PointBounds bounds_;
  FillCosets fill_cosets_[2];  // the walk's cosets for D4 and E8 (SIMD where the processor has it)
  PointTable table_;           // the current sub-vector's (coding/point_table.hpp)
};

}  // namespace cepam
