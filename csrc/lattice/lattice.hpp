// Lattices L = G Z^n for LRSUQ.
//
// A lattice type provides, for its dimension n:
//   closest_point(t, m)  m = integer coordinates (in the basis G) of the
//                        lattice point closest to t (Voronoi cell);
//   to_point(m, p)       p = G m;
//   dither(words, v)     v uniform in the Voronoi cell around 0, from n
//                        64-bit random words (dither_batch: for a chunk
//                        of sub-vectors);
//   packing radius (l2 and l1: the largest ball of that norm inside the
//   cell), packing density (volume of the l2 packing ball / cell volume),
//   and whether the cell *is* the ball of a norm (then every trial is
//   accepted and H carries no information);
//   trial_batch (Z^n; the Voronoi lattices' trials are lrsuq/quantizer.cpp's
//   voronoi_round) / reconstruct_batch: one trial, and the decoder's
//   reconstruction beta (G m + v), over the flat element arrays of a chunk
//   of sub-vectors (same results as dither + closest_point + to_point per
//   sub-vector).
// The hot loops in lrsuq/quantizer.cpp are templated on the lattice type; A2, D4 and
// E8 are in lattice/root_lattices.hpp, and lrsuq/quantizer.cpp dispatches on LatticeId.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/host_device.hpp"
#include "random/chacha20.hpp"
#include "lattice/zn_kernels.hpp"

namespace cepam {

enum class LatticeId : int { Z = 1, A2 = 2, D4 = 3, E8 = 4 };
enum class Norm : int { L2 = 2, L1 = 1 };

// A lower-triangular basis: b[i n + k] is coordinate k of basis vector i,
// zero for k > i, so coordinate k of the lattice point with integer
// coordinates m is sum_{i >= k} m_i b[i n + k].  Lattices report their
// basis in this form; the entropy coder visits k = n-1 down to 0, when every
// m_i with i > k is known (payload/ans_body.hpp).
struct TriangularBasis {
  int n;
  std::vector<double> b;
  double rho = 0.5;  // the l2 packing radius
};

// Volume of the unit l2 ball in R^n divided by 2^n (the l2 packing density of
// Z^n, whose packing ball has radius 1/2 and whose cell has volume 1).
inline double zn_packing_density(int n) {
  // pi^(n/2) / Gamma(n/2 + 1) / 2^n, by the recursion V_n = V_{n-2} 2 pi / n.
  constexpr double pi = 3.14159265358979311600e+00;
  double v = (n % 2 == 0) ? 1.0 : 2.0;  // V_0 = 1, V_1 = 2
  for (int k = (n % 2 == 0) ? 2 : 3; k <= n; k += 2) v *= 2.0 * pi / k;
  return v / std::ldexp(1.0, n);
}

// The integer lattice Z^n, cell [-1/2, 1/2)^n.  FixedDim > 0 fixes the
// dimension at compile time, so that the per-sub-vector loops of the codec
// unroll (the codec instantiates it for n = 1 and 2); FixedDim = 0 takes it
// from n.  Either way n holds the dimension.
template <int FixedDim = 0>
struct BasicLatticeZn {
  int n;

  static constexpr LatticeId id = LatticeId::Z;
  CEPAM_HD int dim() const { return FixedDim > 0 ? FixedDim : n; }
  double packing_radius(Norm) const { return 0.5; }
  double packing_density() const { return zn_packing_density(dim()); }
  bool cell_is_ball() const { return dim() == 1; }  // [-1/2, 1/2] is both balls

  CEPAM_HD void closest_point(const double* t, std::int64_t* m) const {
    for (int k = 0; k < dim(); ++k) m[k] = static_cast<std::int64_t>(round_half_up(t[k]));
  }
  CEPAM_HD void to_point(const std::int64_t* m, double* p) const {
    for (int k = 0; k < dim(); ++k) p[k] = static_cast<double>(m[k]);
  }
  CEPAM_HD void dither(const std::uint64_t* words, double* v) const {
    for (int k = 0; k < dim(); ++k) v[k] = uniform_co(words[k]) - 0.5;
  }
  // dither() of `count` sub-vectors, their words and dithers n apart.
  void dither_batch(const std::uint64_t* words, std::size_t count, double* v) const {
    kernels::zn_dither(words, count * static_cast<std::size_t>(dim()), v);
  }

  // For elements e < count (coordinate k of sub-vector c at e = c n + k;
  // t = x / beta, xs = x, beta repeated per coordinate, w the dither words):
  // q[e] = closest-point coordinate, and unless dev is null, dev[e] = the
  // element's term of the acceptance test's norm of beta (q + v) - x; and
  // unless v_out is null, v_out[e] = the dither v (as dither_batch).
  void trial_batch(const double* t, const double* xs, const double* beta,
                   const std::uint64_t* w, std::size_t count, Norm norm, std::int64_t* q,
                   double* dev, double* v_out = nullptr) const {
    kernels::zn_trial(t, xs, beta, w, count, norm == Norm::L2, q, dev, v_out);
  }
  // y[e] = beta[e] (q[e] + v[e]) for elements e < count (v from dither).
  template <class T>
  void reconstruct_batch(const std::int64_t* q, const double* v, const double* beta,
                         std::size_t count, T* y) const {
    kernels::zn_reconstruct(q, v, beta, count, y);
  }
  std::vector<double> basis() const {
    const int d = dim();
    std::vector<double> g(static_cast<std::size_t>(d * d), 0.0);
    for (int k = 0; k < d; ++k) g[static_cast<std::size_t>(k * d + k)] = 1.0;
    return g;
  }
};

using LatticeZn = BasicLatticeZn<>;

}  // namespace cepam
