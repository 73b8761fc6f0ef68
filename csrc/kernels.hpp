// Element-wise batch kernels of the Z^n LRSUQ loops.
//
// The encoder and decoder lay a chunk of sub-vectors out as flat arrays of
// elements (element e = coordinate k of sub-vector c, e = c n + k), with the
// sub-vector's scale beta repeated for each of its coordinates, and run
// these kernels over them.  Each kernel applies the scalar formula written
// in its comment to every element; the AVX2 forms (kernels.cpp, chosen at
// run time, see cpu.hpp) do so four elements at a time with the same IEEE
// operations in the same order, so the results are the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cepam::kernels {

// out[i count + c] = double(w[c stride + i] >> 11) for i < stride, c < count:
// the 53 random bits of each word as an exact double (uniform_co(w) =
// out 2^-53, uniform_oc(w) = (out + 1) 2^-53), transposed so that word i of
// every sub-vector is contiguous.
void top53_to_double_transposed(const std::uint64_t* w, std::size_t stride, std::size_t count,
                                double* out);

// xs[e] = double(x[e]) * factor;  t[e] = xs[e] * inv_beta[e].
// Returns the first e with !(|t[e]| < limit) (NaN included), or count.
template <class T>
std::size_t scale_inputs(const T* x, double factor, const double* inv_beta, double limit,
                         std::size_t count, double* xs, double* t);

// One trial on the cell [-1/2, 1/2)^n, for e < count:
//   v = uniform_co(w[e]) - 0.5;  f = round_half_up(t[e] - v);  q[e] = f;
// and, unless dev is null (a cell that is the ball accepts every trial),
//   d = beta[e] * (f + v) - xs[e];  dev[e] = d * d (l2_norm) or |d| (l1).
void zn_trial(const double* t, const double* xs, const double* beta, const std::uint64_t* w,
              std::size_t count, bool l2_norm, std::int64_t* q, double* dev);

// y[e] = T(beta[e] * (double(q[e]) + (uniform_co(w[e]) - 0.5))), |q[e]| <= 2^53.
template <class T>
void zn_reconstruct(const std::int64_t* q, const std::uint64_t* w, const double* beta,
                    std::size_t count, T* y);

}  // namespace cepam::kernels
