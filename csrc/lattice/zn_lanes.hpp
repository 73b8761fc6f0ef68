// The Z^n trial, dither and reconstruction loops of lattice/zn_kernels.hpp,
// and the rounding every lattice's lane code builds on, written once for
// SIMD lanes (internal header of lattice/zn_kernels*.cpp and, for the
// rounding, lattice/voronoi_lanes.hpp).
//
// Lane l of a register is element e + l of the flat arrays.  Every function
// mirrors, operation by operation, the per-coordinate code it names
// (cepam::round_half_up, kernels::zn_trial, kernels::zn_dither and
// zn_reconstruct's loop), so each lane gets the scalar bits
// (common/simd_avx2.hpp gives the rules: the same IEEE operations in the same
// order, branches turned into selections).  S is a set of lane operations
// (common/lanes_avx2.hpp, lanes_avx512.hpp, lanes_neon.hpp): splat, load,
// store, store_as (T(v), T float or double), add, sub, mul, floor, ge,
// add_where, abs, uniform_co, int64_bits and load_int64_as_double.
// Include it after the target pragma of S, so that these templates are
// compiled for S's instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam::kernels::lanes {

// round_half_up (lattice/zn_kernels.hpp) as a double: floor, plus one where
// t - floor(t) >= 1/2.
template <class S>
inline typename S::D round_half_up(typename S::D t) {
  const typename S::D f = S::floor(t);
  return S::add_where(S::ge(S::sub(t, f), S::splat(0.5)), f, S::splat(1.0));
}

// zn_dither of the S::L words at w: uniform_co(w) - 0.5.
template <class S>
inline typename S::D zn_dither(const std::uint64_t* w) {
  const double* bits = reinterpret_cast<const double*>(w);  // the words' bit patterns
  return S::sub(S::uniform_co(S::load(bits)), S::splat(0.5));
}

// kernels::zn_trial (the batch form) for the whole groups of S::L elements
// of [0, count); returns how many it did.  q[e] = f (|f| < 2^51, so
// int64_bits is static_cast's value) and, unless null, dev[e] and v[e].
template <class S>
inline std::size_t zn_trials(const double* t, const double* xs, const double* beta,
                             const std::uint64_t* w, std::size_t count, bool l2_norm,
                             std::int64_t* q, double* dev, double* v_out) {
  using D = typename S::D;
  constexpr std::size_t L = S::L;
  std::size_t e = 0;
  for (; e + L <= count; e += L) {
    const D v = zn_dither<S>(w + e);
    if (v_out != nullptr) S::store(v_out + e, v);
    const D f = round_half_up<S>(S::sub(S::load(t + e), v));
    S::store(reinterpret_cast<double*>(q + e), S::int64_bits(f));
    if (dev != nullptr) {
      // d = beta (f + v) - xs; d^2 or |d|
      const D d = S::sub(S::mul(S::load(beta + e), S::add(f, v)), S::load(xs + e));
      S::store(dev + e, l2_norm ? S::mul(d, d) : S::abs(d));
    }
  }
  return e;
}

// kernels::zn_dither (the batch form) for the whole groups of S::L.
template <class S>
inline std::size_t zn_dithers(const std::uint64_t* w, std::size_t count, double* v) {
  constexpr std::size_t L = S::L;
  std::size_t e = 0;
  for (; e + L <= count; e += L) S::store(v + e, zn_dither<S>(w + e));
  return e;
}

// kernels::zn_reconstruct for the whole groups of S::L:
// y[e] = T(beta[e] (double(q[e]) + v[e])), |q[e]| <= 2^53 (exact as double).
template <class S, class T>
inline std::size_t zn_reconstructs(const std::int64_t* q, const double* v, const double* beta,
                                   std::size_t count, T* y) {
  constexpr std::size_t L = S::L;
  std::size_t e = 0;
  for (; e + L <= count; e += L)
    S::store_as(y + e, S::mul(S::load(beta + e), S::add(S::load_int64_as_double(q + e),
                                                         S::load(v + e))));
  return e;
}

}  // namespace cepam::kernels::lanes
