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
#include <vector>

#include "lattice/lattice.hpp"
#include "coding/point_core.hpp"
#include "coding/rans.hpp"
#include "coding/source_model.hpp"

namespace cepam {

class PointCoder {
 public:
  // 64 keeps the table cheap (E8 at rms/sigma 0.9: 2.3 M coords/s encode,
  // 5.6 decode, 0.89 bits; 1024 gave 0.78 bits at 0.2 M coords/s).
  static constexpr std::size_t kMaxCandidates = 64;
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

 private:
  // The squared distance of G^T m to t, accumulated for k = n-1 .. 0 as
  // partial = extend(k, offset(k, m), m_k, partial) (both enumerate and
  // listed, so that they agree to the bit).
  double offset(int k, const std::int64_t* m) const;
  double extend(int k, double off, std::int64_t mk, double partial) const;
  // The candidates of level K (and, recursively, below) for dimension N,
  // given cur_[i] for i > K (the dimension and level fixed at compile time,
  // so that the loops over the basis unroll); the same arithmetic as
  // offset and extend.
  template <int N, int K>
  void enumerate(double partial);
  // D4 and E8: the same candidates, in the same order, with the same
  // distances, found in the coordinates x = G^T m (see point_coder.cpp).
  template <int N>
  void walk_top(double);
  template <int N, int K>
  bool walk(double partial, const Coset& s, double sum);
  // x = G^T m, and m from x (exact for D4 and E8 points near t).
  template <int N>
  void to_x(const std::int64_t* m, double* x) const;
  template <int N>
  void solve(const double* x, std::int64_t* m) const;
  void solve(const double* x, std::int64_t* m) const;
  // The candidate that is m, or count_.
  std::size_t find(const std::int64_t* m) const;
  using Enumerate = void (PointCoder::*)(double);
  static Enumerate enumerator(int n);

  int n_;
  std::vector<double> b_;
  PointBounds bounds_;
  Enumerate enumerate_;
  double inv_g_[8];  // 1 / G_kk where G_kk is a power of two, else 0
  int terms_[8];         // level k: the rows i > k with G_ik != 0,
  int term_row_[8][8];   // term_row_[k][0 .. terms_[k]), in order
  int pad_row_[8][3];     // walk: those rows padded to kTerms (row n: m_n = 0)
  double pad_g_[8][3];    // and their G_ik (0 for the padding)
  // The current sub-vector's table.
  double t_[8];
  double r2_;
  std::size_t count_;
  bool overflow_;
  std::int64_t cur_[8];
  // walk: the cosets' tables (Coset, computed once per sub-vector) and the
  // current point's coordinates.
  FillCosets fill_cosets_;  // D4 and E8 (walk_top; the candidates in candx_), else null
  bool walked() const { return fill_cosets_ != nullptr; }
  Coset coset_[2];
  double x_[8];
  std::vector<double> candx_;  // their coordinates x (cand_ is not used)
  std::vector<std::int64_t> cand_;  // count_ points of n coordinates
  std::vector<double> d2_;          // their squared distances to t
  std::vector<std::uint32_t> freq_;  // their frequencies
  std::vector<std::uint32_t> cum_;   // count_ + 1 cumulative frequencies
};

}  // namespace cepam
