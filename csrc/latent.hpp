// Latent variables of the layered construction.
//
// A noise law f whose superlevel sets are balls is a mixture of uniform
// distributions on balls: z | U ~ Uniform(r(U) * Ball) gives z ~ f when
//   Gaussian(sigma), dimension n:  U ~ chi2(n+2),   r = sigma sqrt(U), l2 ball;
//   Laplace(b), n = 1:             U ~ Gamma(2, 1), r = b U,          interval;
//   Laplace(b), n > 1 (product):   U ~ Gamma(n+1,1), r = b U,         l1 ball.
// Each sampler turns a fixed number of 64-bit random words into r(U), with
// the deterministic logarithm and cosine of detmath.hpp.
//
// chi2(2k) = -2 log(u_1 ... u_k); chi2(1) = -2 log(u_a) cos^2(2 pi u_b)
// (Box-Muller); Gamma(k, 1) = -log(u_1 ... u_k).  Products of at most 9
// uniforms in (0, 1] stay above 2^-477: no underflow.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "chacha20.hpp"
#include "detmath.hpp"
#include "kernels.hpp"
#include "lattice.hpp"

namespace cepam {

enum class MechanismId : int { Gaussian = 1, Laplace = 2 };

// Sub-vectors per pass of the batch samplers, and the most words a
// sub-vector's latent variable takes (Gaussian, n = 7) (bound their stack
// buffers).
inline constexpr std::size_t kLatentBatch = 256;
inline constexpr std::size_t kMaxLatentWords = 6;

struct GaussianLatent {
  int n;
  double sigma;

  Norm norm() const { return Norm::L2; }
  // Words per sub-vector: k/2 for even k = n + 2, (k - 1)/2 + 2 for odd k.
  int words() const { return (n % 2 == 0) ? (n + 2) / 2 : (n + 1) / 2 + 2; }

  // out[c] = r(U_c) for c < count, sub-vector c's words at w + c words().
  // Per sub-vector:  half = log(u_1 ... u_{k/2})               (= -chi2(2[k/2]) / 2)
  //                  half += log(u_a) cos^2(2 pi u_b)            (odd k only)
  //                  r = sigma sqrt(-2 half).
  // Each step runs over the whole batch so the logarithms and cosines go
  // through the SIMD batch functions.
  void radii(const std::uint64_t* w, std::size_t count, double* out) const {
    const std::size_t W = static_cast<std::size_t>(words());
    const int k = n + 2;
    const std::size_t pairs = static_cast<std::size_t>(k / 2);
    double u[kLatentBatch * kMaxLatentWords];
    for (std::size_t c0 = 0; c0 < count; c0 += kLatentBatch) {
      const std::size_t cnt = count - c0 < kLatentBatch ? count - c0 : kLatentBatch;
      // u + i cnt: word i of each sub-vector as double(w >> 11), so that
      // uniform_oc(w) = (u + 1) 2^-53 and uniform_co(w) = u 2^-53 exactly.
      kernels::top53_to_double_transposed(w + c0 * W, W, cnt, u);
      double* half = out + c0;
      for (std::size_t c = 0; c < cnt; ++c) half[c] = 1.0;
      for (std::size_t i = 0; i < pairs; ++i)
        for (std::size_t c = 0; c < cnt; ++c) half[c] *= (u[i * cnt + c] + 1.0) * 0x1.0p-53;
      detmath::log_batch(half, half, cnt);
      if (k % 2 == 1) {
        double* a = u + pairs * cnt;  // log(u_a) cos^2(2 pi u_b), in place
        double* b = a + cnt;
        for (std::size_t c = 0; c < cnt; ++c) {
          a[c] = (a[c] + 1.0) * 0x1.0p-53;  // uniform_oc
          b[c] = b[c] * 0x1.0p-53;          // uniform_co
        }
        detmath::log_batch(a, a, cnt);
        detmath::cos2pi_squared_batch(b, b, cnt);
        for (std::size_t c = 0; c < cnt; ++c) half[c] += a[c] * b[c];
      }
      for (std::size_t c = 0; c < cnt; ++c) half[c] = sigma * std::sqrt(-2.0 * half[c]);
    }
  }
};

struct LaplaceLatent {
  int n;
  double b;

  Norm norm() const { return Norm::L1; }  // for n = 1 the l1 ball is the interval
  int words() const { return n + 1; }

  // out[c] = r(U_c) = b (-log(u_1 ... u_{n+1})) for c < count.
  void radii(const std::uint64_t* w, std::size_t count, double* out) const {
    const std::size_t W = static_cast<std::size_t>(words());
    double u[kLatentBatch * kMaxLatentWords];
    for (std::size_t c0 = 0; c0 < count; c0 += kLatentBatch) {
      const std::size_t cnt = count - c0 < kLatentBatch ? count - c0 : kLatentBatch;
      kernels::top53_to_double_transposed(w + c0 * W, W, cnt, u);  // as above
      double* r = out + c0;
      for (std::size_t c = 0; c < cnt; ++c) r[c] = 1.0;
      for (std::size_t i = 0; i < W; ++i)
        for (std::size_t c = 0; c < cnt; ++c) r[c] *= (u[i * cnt + c] + 1.0) * 0x1.0p-53;
      detmath::log_batch(r, r, cnt);
      for (std::size_t c = 0; c < cnt; ++c) r[c] = b * -r[c];
    }
  }
};

}  // namespace cepam
