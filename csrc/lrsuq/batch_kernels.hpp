// Element-wise batch kernels of the LRSUQ loops (the lattice's own, Z^n's,
// are in lattice/zn_kernels.hpp).
//
// The encoder and decoder lay a chunk of sub-vectors out as flat arrays of
// elements (element e = coordinate k of sub-vector c, e = c n + k), with the
// sub-vector's scale beta repeated for each of its coordinates, and run
// these kernels over them.  Each kernel applies the scalar formula written
// in its comment to every element; the AVX2 forms (lrsuq/batch_kernels.cpp, chosen at
// run time, see common/cpu.hpp) do so four elements at a time with the same IEEE
// operations in the same order, so the results are the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam::kernels {

// 64-bit words per sub-vector of the Gaussian latent in dimension n: k / 2
// for even k = n + 2, (k - 1) / 2 + 2 for odd k.
inline constexpr int gaussian_words(int n) { return (n % 2 == 0) ? (n + 2) / 2 : (n + 1) / 2 + 2; }

// The latent samplers' radii (lrsuq/latent.hpp), for sub-vectors c < count whose
// words start at w + c W (W the sampler's words per sub-vector; the codec
// draws Gaussian n = 1 by the Maxwell ziggurat instead, lrsuq/maxwell_kernels.hpp):
// Gaussian(sigma), k = n + 2, p = k / 2:
//   half = log(u_oc(w_0) ... u_oc(w_{p-1}));
//   if k is odd: half += log(u_oc(w_p)) cos2pi_squared(u_co(w_{p+1}));
//   out[c] = sigma sqrt(-2 half).
// Laplace(b): out[c] = b (-log(u_oc(w_0) ... u_oc(w_n))).
// Products are accumulated from 1.0 in word order.
void gaussian_radii(int n, double sigma, const std::uint64_t* w, std::size_t count, double* out);
void laplace_radii(int n, double b, const std::uint64_t* w, std::size_t count, double* out);

// out[c] = 1.0 / b[c], correctly rounded (the division's bits), for
// c < count.  With AVX-512 without the divider, whose throughput bounds a
// loop of divisions (lrsuq/batch_kernels.cpp says how, and why exactly).
void reciprocals(const double* b, std::size_t count, double* out);

// xs[e] = double(x[e]) * factor;  t[e] = xs[e] * inv_beta[e].
// Returns the first e with !(|t[e]| < limit) (NaN included), or count.
template <class T>
std::size_t scale_inputs(const T* x, double factor, const double* inv_beta, double limit,
                         std::size_t count, double* xs, double* t);

}  // namespace cepam::kernels
