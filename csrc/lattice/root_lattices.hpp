// The Voronoi lattices A2, D4 and E8 (besides Z^n, lattice/lattice.hpp), for the
// Gaussian mechanism: the acceptance region is the l2 ball of radius
// beta rho, which lies strictly inside the scaled Voronoi cell, so no cell is
// a ball and H ~ Geometric(packing density).
//
// Scalings (docs/design.md, section 3):
//   A2: minimal distance 1; rho = 1/2; cell area sqrt(3)/2;
//   D4 = {x in Z^4 : sum x even}; rho = sqrt(2)/2; cell volume 2;
//   E8 = D8 u (D8 + (1/2, ..., 1/2)); rho = sqrt(2)/2; cell volume 1.
// Lower-triangular bases (rows = basis vectors, see TriangularBasis):
//   A2: (1, 0), (1/2, sqrt(3)/2);
//   D4: (2,0,0,0), (1,1,0,0), (1,0,1,0), (1,0,0,1);
//   E8: (2,0,...,0), e_k - e_{k-1} for k = 1..6, (1/2, ..., 1/2).
//
// Closest points follow Conway and Sloane, "Fast quantizing and decoding
// algorithms for lattice quantizers and codes" (1982):
//   D_n: round every coordinate (halves up); if the coordinate sum is odd,
//        re-round the coordinate with the largest rounding error (the first
//        such coordinate on ties) the other way;
//   E8:  decode t in D8 and t - 1/2 in D8 (then add 1/2 back); keep the
//        nearer, D8 on ties;
//   A2:  the union of the rectangular lattice Z x sqrt(3) Z and its shift by
//        (1/2, sqrt(3)/2); each is decoded by rounding per coordinate; keep
//        the nearer, the unshifted one on ties.
// D4 and E8 points are integers or half-integers: they are converted to
// basis coordinates exactly, in doubled integer coordinates.  A2's second
// basis vector is irrational; its points are (m0 + m1 / 2, m1 h) with
// h = sqrt(3) / 2 as a double, the same expression in closest_point and
// to_point.
//
// Dither: u_k = uniform_co(w_k), p = G^T u (a uniform point of the
// fundamental parallelepiped; each type writes out its formula, which gives
// the bits of sum_{i >= k} u_i G_ik summed in order of i), v = p - Q(p):
// uniform in the Voronoi cell.  Only +, -, *, / and the
// closest point, so it is the same bits everywhere.
//
// The closest points, dithers and their helpers are CEPAM_HD inline
// functions (common/host_device.hpp): the same scalar code for a GPU.
// dither_batch runs the SIMD kernels of A2, D4 and E8 first
// (lattice/voronoi_kernels.hpp: four or eight sub-vectors at a time, the
// same operations), then the scalar loop over the remaining sub-vectors of
// the chunk; the encoder's trials are lrsuq/quantizer.cpp's voronoi_round
// (the same kernels, then subvector::voronoi_trial); reconstruct_batch
// runs the AVX-512 kernels over the whole sub-vectors, then the scalar loop
// (the decoder's count may end inside the last sub-vector, whose remaining
// outputs are dropped).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/host_device.hpp"
#include "random/chacha20.hpp"
#include "lattice/lattice.hpp"
#include "lattice/voronoi_kernels.hpp"

namespace cepam {

namespace lattice_detail {

constexpr double kPi = 3.14159265358979311600e+00;

// round_half_up(t) as an integer, for |t| < 2^51: floor by truncation (one
// instruction, where std::floor is a library call without SSE4.1), then up
// when the remainder t - floor(t) (exact) is at least 1/2.
CEPAM_HD inline std::int64_t round_half_up_i64(double t) {
  std::int64_t i = static_cast<std::int64_t>(t);
  i -= (t < static_cast<double>(i)) ? 1 : 0;
  return i + ((t - static_cast<double>(i) >= 0.5) ? 1 : 0);
}

// The D_n closest point g of t (|t_k| < 2^51) by Conway and Sloane: round
// every coordinate (halves up); if the sum is odd, re-round the coordinate
// with the largest rounding error |e_k| (the first on ties) the other way.
// Returns the squared distance, sum e_k^2 (+ 1 - 2 |e_w| after a
// re-rounding), accumulated in coordinate order.  Branch-free apart from
// the loop.
template <int N>
CEPAM_HD inline double closest_dn(const double* t, std::int64_t* g) {
  double d2 = 0.0, worst = -1.0;
  std::int64_t sum = 0;
  int w = 0;
  for (int k = 0; k < N; ++k) {
    g[k] = round_half_up_i64(t[k]);
    const double e = t[k] - static_cast<double>(g[k]);
    d2 += e * e;
    sum += g[k];
    const double a = std::fabs(e);
    const int larger = a > worst ? 1 : 0;
    w += larger * (k - w);  // (arithmetic: a conditional here compiles to a branch)
    worst = a > worst ? a : worst;
  }
  const std::int64_t odd = sum & 1;
  const double ew = t[w] - static_cast<double>(g[w]);
  g[w] += odd * (ew >= 0.0 ? 1 : -1);
  d2 += static_cast<double>(odd) * (1.0 - 2.0 * worst);
  return d2;
}

template <int N>
CEPAM_HD inline double dist2(const double* a, const double* b) {
  double s = 0.0;
  for (int k = 0; k < N; ++k) {
    const double d = a[k] - b[k];
    s += d * d;
  }
  return s;
}

}  // namespace lattice_detail

// Shared machinery of the Voronoi lattices: Derived provides
//   static constexpr int kDim; id; rho(); density(); basis_rows();
//   closest(t, m, p): m = integer coordinates, p = the point (as to_point(m));
//   to_point(m, p).
template <class Derived, int N>
struct VoronoiLattice {
  static constexpr int kDim = N;
  CEPAM_HD int dim() const { return N; }
  // The Gaussian mechanism only (LrsuqParams' check): the l2 radius for any norm.
  double packing_radius(Norm) const { return Derived::rho(); }
  double packing_density() const { return Derived::density(); }
  bool cell_is_ball() const { return false; }

  CEPAM_HD const Derived& self() const { return static_cast<const Derived&>(*this); }

  CEPAM_HD void closest_point(const double* t, std::int64_t* m) const {
    double p[N];
    self().closest(t, m, p);
  }

  // v = p - Q(p), p = G^T u (Derived::parallelepiped), u_k = uniform_co(w_k).
  // p lies in [-1, 4)^n, so p - Q(p) is exact.
  CEPAM_HD void dither(const std::uint64_t* words, double* v) const {
    double u[N], p[N], c[N];
    std::int64_t m[N];
    for (int k = 0; k < N; ++k) u[k] = uniform_co(words[k]);
    Derived::parallelepiped(u, p);
    self().closest(p, m, c);
    for (int k = 0; k < N; ++k) v[k] = p[k] - c[k];
  }

  // dither() of `count` sub-vectors, their words and dithers n apart (the
  // SIMD kernels first, lattice/voronoi_kernels.hpp, then this loop).
  void dither_batch(const std::uint64_t* words, std::size_t count, double* v) const {
    const std::size_t done = kernels::voronoi_dither(Derived::id, words, count, v);
    for (std::size_t c = done; c < count; ++c) dither(words + c * N, v + c * N);
  }

  template <class T>
  void reconstruct_batch(const std::int64_t* q, const double* v, const double* beta,
                         std::size_t count, T* y) const {
    const std::size_t done = N * kernels::voronoi_reconstruct(Derived::id, q, v, beta, count / N, y);
    for (std::size_t e = done; e < count; e += N) {
      double p[N];
      self().to_point(q + e, p);
      const std::size_t end = (count - e < static_cast<std::size_t>(N)) ? count - e : N;
      for (std::size_t k = 0; k < end; ++k) y[e + k] = static_cast<T>(beta[e + k] * (p[k] + v[e + k]));
    }
  }

  std::vector<double> basis() const {
    const double* b = Derived::basis_rows();
    return std::vector<double>(b, b + N * N);
  }
};

// A2, minimal distance 1.
struct LatticeA2 : VoronoiLattice<LatticeA2, 2> {
  static constexpr LatticeId id = LatticeId::A2;
  // h = sqrt(3) / 2; sqrt is correctly rounded (IEEE), the halving exact.
  CEPAM_HD static double h() { return std::sqrt(3.0) * 0.5; }
  CEPAM_HD static double rho() { return 0.5; }
  // pi / (2 sqrt 3)
  static double density() { return lattice_detail::kPi / (2.0 * std::sqrt(3.0)); }
  static const double* basis_rows() {
    static const double b[4] = {1.0, 0.0, 0.5, h()};
    return b;
  }

  // p = G^T u: (u0 + u1 / 2, u1 h).
  CEPAM_HD static void parallelepiped(const double* u, double* p) {
    p[0] = u[0] + u[1] * 0.5;
    p[1] = u[1] * h();
  }

  CEPAM_HD void to_point(const std::int64_t* m, double* p) const {
    const double m0 = static_cast<double>(m[0]);
    const double m1 = static_cast<double>(m[1]);
    p[0] = m0 + m1 * 0.5;
    p[1] = m1 * h();
  }

  CEPAM_HD void closest(const double* t, std::int64_t* m, double* p) const {
    using lattice_detail::round_half_up_i64;
    const double hh = h();
    const double s = t[1] / (2.0 * hh);  // t1 / sqrt(3): the row of the rectangular lattices
    // Coset 0: (a, sqrt(3) b), basis coordinates (a - b, 2 b).
    const std::int64_t a0 = round_half_up_i64(t[0]);
    const std::int64_t b0 = round_half_up_i64(s);
    // Coset 1: (a + 1/2, sqrt(3) (b + 1/2)), basis coordinates (a - b, 2 b + 1).
    const std::int64_t a1 = round_half_up_i64(t[0] - 0.5);
    const std::int64_t b1 = round_half_up_i64(s - 0.5);
    const std::int64_t m0[2] = {a0 - b0, 2 * b0};
    const std::int64_t m1[2] = {a1 - b1, 2 * b1 + 1};
    double p0[2], p1[2];
    to_point(m0, p0);
    to_point(m1, p1);
    const bool second = lattice_detail::dist2<2>(t, p1) < lattice_detail::dist2<2>(t, p0);
    for (int k = 0; k < 2; ++k) {
      m[k] = second ? m1[k] : m0[k];
      p[k] = second ? p1[k] : p0[k];
    }
  }
};

// D4 = {x in Z^4 : sum even}.
struct LatticeD4 : VoronoiLattice<LatticeD4, 4> {
  static constexpr LatticeId id = LatticeId::D4;
  CEPAM_HD static double rho() { return std::sqrt(2.0) * 0.5; }
  static double density() { return lattice_detail::kPi * lattice_detail::kPi / 16.0; }
  static const double* basis_rows() {
    static const double b[16] = {2, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1};
    return b;
  }

  // p = G^T u: (((2 u0 + u1) + u2) + u3, u1, u2, u3).
  CEPAM_HD static void parallelepiped(const double* u, double* p) {
    p[0] = ((2.0 * u[0] + u[1]) + u[2]) + u[3];
    p[1] = u[1];
    p[2] = u[2];
    p[3] = u[3];
  }

  CEPAM_HD void to_point(const std::int64_t* m, double* p) const {
    p[0] = static_cast<double>(2 * m[0] + m[1] + m[2] + m[3]);
    p[1] = static_cast<double>(m[1]);
    p[2] = static_cast<double>(m[2]);
    p[3] = static_cast<double>(m[3]);
  }

  CEPAM_HD void closest(const double* t, std::int64_t* m, double* p) const {
    std::int64_t P[4];
    lattice_detail::closest_dn<4>(t, P);
    for (int k = 0; k < 4; ++k) p[k] = static_cast<double>(P[k]);
    m[3] = P[3];
    m[2] = P[2];
    m[1] = P[1];
    m[0] = (P[0] - P[1] - P[2] - P[3]) / 2;  // exact: the sum is even
  }
};

// E8 = D8 u (D8 + 1/2).
struct LatticeE8 : VoronoiLattice<LatticeE8, 8> {
  static constexpr LatticeId id = LatticeId::E8;
  CEPAM_HD static double rho() { return std::sqrt(2.0) * 0.5; }
  // pi^4 / 384
  static double density() {
    const double p2 = lattice_detail::kPi * lattice_detail::kPi;
    return p2 * p2 / 384.0;
  }
  static const double* basis_rows() {
    static const double b[64] = {
        2,   0,   0,   0,   0,   0,   0,   0,     //
        -1,  1,   0,   0,   0,   0,   0,   0,     //
        0,   -1,  1,   0,   0,   0,   0,   0,     //
        0,   0,   -1,  1,   0,   0,   0,   0,     //
        0,   0,   0,   -1,  1,   0,   0,   0,     //
        0,   0,   0,   0,   -1,  1,   0,   0,     //
        0,   0,   0,   0,   0,   -1,  1,   0,     //
        0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    return b;
  }

  // p = G^T u: p7 = u7 / 2; p6 = u6 + u7 / 2; p_k = (u_k - u_{k+1}) + u7 / 2
  // for 1 <= k <= 5; p0 = (2 u0 - u1) + u7 / 2.
  CEPAM_HD static void parallelepiped(const double* u, double* p) {
    const double h7 = u[7] * 0.5;
    p[7] = h7;
    p[6] = u[6] + h7;
    for (int k = 1; k <= 5; ++k) p[k] = (u[k] - u[k + 1]) + h7;
    p[0] = (2.0 * u[0] - u[1]) + h7;
  }

  // Doubled point coordinates P = 2 G^T m (integers):
  //   P_7 = m7;  P_6 = 2 m6 + m7;  P_k = 2 (m_k - m_{k+1}) + m7 (1 <= k <= 5);
  //   P_0 = 4 m0 - 2 m1 + m7.
  CEPAM_HD void to_point(const std::int64_t* m, double* p) const {
    const std::int64_t m7 = m[7];
    p[7] = static_cast<double>(m7) * 0.5;
    p[6] = static_cast<double>(2 * m[6] + m7) * 0.5;
    for (int k = 1; k <= 5; ++k) p[k] = static_cast<double>(2 * (m[k] - m[k + 1]) + m7) * 0.5;
    p[0] = static_cast<double>(4 * m[0] - 2 * m[1] + m7) * 0.5;
  }

  // D8 decodes t into g0 and t - 1/2 (exact for |t| < 2^51) into g1; the
  // half coset's point is g1 + 1/2, at the distance of t - 1/2 from g1.
  // Doubled coordinates of the nearer (D8 on ties): P = 2 g0 or 2 g1 + 1.
  CEPAM_HD void closest(const double* t, std::int64_t* m, double* p) const {
    std::int64_t g0[8], g1[8], P[8];
    double s[8];
    for (int k = 0; k < 8; ++k) s[k] = t[k] - 0.5;
    const double d0 = lattice_detail::closest_dn<8>(t, g0);
    const double d1 = lattice_detail::closest_dn<8>(s, g1);
    const std::int64_t c = d1 < d0 ? 1 : 0;
    for (int k = 0; k < 8; ++k) {
      P[k] = 2 * (g0[k] + c * (g1[k] - g0[k])) + c;
      p[k] = static_cast<double>(P[k]) * 0.5;
    }
    // Inverse of to_point, exact: every difference P_k - m7 is even.
    const std::int64_t m7 = P[7];
    m[7] = m7;
    m[6] = (P[6] - m7) / 2;
    for (int k = 5; k >= 1; --k) m[k] = (P[k] - m7) / 2 + m[k + 1];
    m[0] = ((P[0] - m7) / 2 + m[1]) / 2;
  }
};

}  // namespace cepam
